"""Inference view in a real TensorBoard, in chromium: the tab is offered only on serving traces;
on the SGLang prefill trace and the vLLM decode replay it shows the payload's phases, counts,
per-token latency and bandwidth (or why it is not estimable), and every rule it used."""

from __future__ import annotations

from .pages import TIMEOUT_MS, fmt_duration, need, open_view, shot, view_selection

VIEW = "Inference"


def _open(page, tb, run):
    selection = view_selection(tb, need(tb, run), VIEW)
    frame = open_view(page, tb, VIEW, **selection)
    frame.wait_for_selector("[data-testid=inference-view]", timeout=TIMEOUT_MS)
    return frame, tb.api("inference", **selection)


def test_tab_only_on_serving_traces(tensorboard):
    assert VIEW in tensorboard.api("views", run=need(tensorboard, "tl_sglang_prefilldecode"))
    assert VIEW in tensorboard.api("views", run=need(tensorboard, "tl_vllm_decode_fullgraph"))
    for run in ("resnet50_gpu_pt19", "tl_vllm_decode_fullgraph/capture"):
        assert VIEW not in tensorboard.api("views", run=need(tensorboard, run))


def test_prefill_step(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "tl_sglang_prefilldecode")
    [phase] = payload["phases"]
    assert phase["phase"] == "prefill" and phase["tokens"] == 15360
    assert frame.inner_text("[data-testid=inference-steady-steps]") == "1"
    assert frame.inner_text("[data-testid=phase-prefill-per-token]") == fmt_duration(
        phase["us_per_token"])
    # the UI's pct(): two decimals and " %"
    assert frame.inner_text("[data-testid=phase-prefill-bandwidth]") == (
        f"{phase['bandwidth_pct']:.2f} %")
    table = frame.inner_text("[data-testid=phase-prefill-categories]")
    assert "GEMM" in table and "communication" not in table  # categories with time only
    formulas = frame.inner_text("[data-testid=inference-formulas]")
    for text in payload["formulas"].values():
        assert text in formulas
    rows = frame.locator("[data-testid=inference-steps-table] [data-testid=table-row]")
    assert rows.count() == 1
    shot(page, artifacts, "inference_prefill")


def test_decode_replay(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "tl_vllm_decode_fullgraph")
    [phase] = payload["phases"]
    assert phase["phase"] == "decode"
    assert frame.inner_text("[data-testid=phase-decode-itl]") == fmt_duration(
        phase["inter_token_latency_us"])
    assert frame.inner_text("[data-testid=phase-decode-bandwidth]") == "not estimable"
    notes = frame.inner_text("[data-testid=inference-notes]")
    for note in payload["notes"]:
        assert note in notes
    shot(page, artifacts, "inference_decode_replay")
