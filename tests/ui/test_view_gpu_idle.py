"""GPU Idle view in a real TensorBoard, in chromium: a GPU trace (resnet50_gpu_pt19: idle share,
launch counts and recommendations as the API gives them, every formula shown), a CPU-only trace
(the view says what does not apply), dark theme, and no request outside 127.0.0.1."""

from __future__ import annotations

from .pages import (
    TIMEOUT_MS,
    assert_dark,
    fmt_duration,
    fmt_us,
    need,
    open_view,
    shot,
    view_selection,
)

VIEW = "GPU Idle"


def _open(page, tb, run):
    selection = view_selection(tb, need(tb, run), VIEW)
    frame = open_view(page, tb, VIEW, **selection)
    frame.wait_for_selector("[data-testid=gpu-idle-view]", timeout=TIMEOUT_MS)
    return frame, tb.api("gpu_idle", **selection)


def test_gpu_trace(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "resnet50_gpu_pt19")
    [dev] = payload["temporal"]
    # the UI's pct(): two decimals and " %"
    assert frame.inner_text("[data-testid=gpu-idle-pct-0]") == f"{dev['idle_pct']:.2f} %"
    assert frame.inner_text("[data-testid=gpu-idle-kernels]") == fmt_us(
        payload["launch"]["kernels"])
    shown = frame.locator("[data-testid=formula]").all_inner_texts()
    formulas = payload["formulas"]
    for key in ("temporal", "idle", "launch", "queue", "bandwidth", "sequences", "annotations",
                "critical_path"):
        assert any(formulas[key] in text for text in shown), key
    rules = frame.locator("[data-testid=gpu-idle-rec]").evaluate_all(
        "els => els.map(e => e.dataset.rule)")
    assert rules == [r["id"] for r in payload["recommendations"]]
    frame.wait_for_selector("[data-testid=gpu-idle-temporal-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    shot(page, artifacts, "gpu_idle_light")


def test_cpu_only_says_not_applicable(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "cpu_only")
    assert payload["applicable"] is False
    assert payload["message"] in frame.inner_text("[data-testid=gpu-idle-na]")
    assert frame.locator("[data-testid=gpu-idle-temporal]").count() == 0
    assert frame.locator("[data-testid=gpu-idle-annotations]").count() == 1
    shot(page, artifacts, "gpu_idle_cpu_only")


def test_graph_replay_shows_the_graph_notes(page, tensorboard, artifacts):
    """The vLLM decode replay: one banner with the payload's graph notes (one launch of 421
    kernels, the 6.4 ms backlog), the analyses still shown."""
    frame, payload = _open(page, tensorboard, "tl_vllm_decode_fullgraph")
    assert payload["applicable"] is True and payload["graphs"]["mode"] == "replay"
    text = frame.inner_text("[data-testid=gpu-idle-graphs]")
    assert len(payload["graphs"]["notes"]) == 2
    for note in payload["graphs"]["notes"]:
        assert note in text
    assert frame.locator("[data-testid=gpu-idle-temporal]").count() == 1
    shot(page, artifacts, "gpu_idle_graph_replay")


def test_capture_trace_says_not_applicable(page, tensorboard, artifacts):
    frame, payload = _open(page, tensorboard, "tl_vllm_decode_fullgraph/capture")
    assert payload["applicable"] is False and payload["graphs"]["mode"] == "capture"
    assert payload["message"] in frame.inner_text("[data-testid=gpu-idle-na]")
    assert frame.locator("[data-testid=gpu-idle-temporal]").count() == 0
    assert frame.locator("[data-testid=gpu-idle-graphs]").count() == 0
    shot(page, artifacts, "gpu_idle_graph_capture")


def test_dark(dark_page, tensorboard, artifacts):
    frame, _ = _open(dark_page, tensorboard, "resnet50_gpu_pt19")
    assert_dark(frame, "[data-testid=gpu-idle-temporal]")
    frame.wait_for_selector("[data-testid=gpu-idle-temporal-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    shot(dark_page, artifacts, "gpu_idle_dark")


ROOT = "[data-testid=trace-canvas-root]"
HIGHLIGHTED = """step => {
  const r = document.querySelector('[data-testid=trace-canvas-root]');
  if (!r || r.dataset.state !== 'ready' || r.dataset.loading) return false;
  const vs = +r.dataset.viewStart, ve = +r.dataset.viewEnd, eps = (ve - vs) * 1e-3;
  return r.dataset.criticalStep === step && +r.dataset.criticalDrawn > 0
    && +r.dataset.frameStart <= vs + eps && +r.dataset.frameEnd >= ve - eps;
}"""


def _show_on_trace(page, tb, artifacts, name):
    """GPU Idle -> pick the second step -> Show on Trace: the Trace view of the same span opens
    zoomed to that step with its critical path outlined (debug probe) and t_crit in the URL."""
    page.add_init_script("window.__TORCH_PROF_DEBUG__ = true")
    selection = view_selection(tb, need(tb, "resnet50_gpu_pt19"), VIEW)
    frame = open_view(page, tb, VIEW, **selection)
    frame.wait_for_selector("[data-testid=gpu-idle-critical-show]", timeout=TIMEOUT_MS)
    steps = [s["step"] for s in tb.api("gpu_idle", **selection)["critical_path"]["steps"]]
    step = steps[1]
    frame.select_option("[data-testid=gpu-idle-critical-step]", step)
    frame.click("[data-testid=gpu-idle-critical-show]")
    frame.wait_for_function(HIGHLIGHTED, arg=step, timeout=TIMEOUT_MS)
    assert f"t_crit={step}" in page.url and "view=Trace" in page.url
    assert frame.inner_text("[data-testid=trace-critical]").startswith(
        f"Critical path · step {step}")
    # the same path as the GPU Idle payload's for that step
    path = tb.api("gpu_idle", step=step, **selection)["critical_path"]
    timeline = tb.api("timeline", critical_step=step, **selection)
    crit = timeline["critical"]
    attr = lambda key: float(frame.get_attribute(ROOT, f"data-{key}"))  # noqa: E731
    assert attr("critical-nodes") == crit["nodes"] == len(path["event_ids"]) > 0
    assert attr("critical-marked") > 0 and attr("critical-edges") > 0
    # zoomed to the step (trace time = absolute - trace start), a small margin on each side
    lo, hi = (crit[k] - timeline["trace_start_us"] for k in ("start_us", "end_us"))
    view_start, view_end = attr("view-start"), attr("view-end")
    assert view_start <= lo + 1e-3 and view_end >= hi - 1e-3
    assert view_end - view_start < 1.1 * (hi - lo)
    shot(page, artifacts, name)
    return frame


def test_show_critical_path_on_trace(page, tensorboard, artifacts):
    frame = _show_on_trace(page, tensorboard, artifacts, "gpu_idle_critical_trace_light")
    frame.click("[data-testid=trace-critical-clear]")
    frame.wait_for_selector("[data-testid=trace-critical]", state="detached", timeout=TIMEOUT_MS)
    frame.wait_for_function(
        "() => document.querySelector('[data-testid=trace-canvas-root]').dataset.criticalStep"
        " === ''", timeout=TIMEOUT_MS)
    assert frame.get_attribute(ROOT, "data-critical-drawn") == "0"
    assert "t_crit" not in page.url


def test_show_critical_path_on_trace_dark(dark_page, tensorboard, artifacts):
    _show_on_trace(dark_page, tensorboard, artifacts, "gpu_idle_critical_trace_dark")


def test_run_level_what_if(page, tensorboard, artifacts):
    """A run-level edit (the straggler recommendation's kind) in the What-if panel replays the
    span's ranks (`/whatif/run`): the headline and one row per rank with its numbers."""
    selection = view_selection(tensorboard, need(tensorboard, "ddp_gloo"), VIEW)
    expected = tensorboard.api("whatif/run", run="ddp_gloo", span=selection["span"],
                               edit="straggler=0")
    frame = open_view(page, tensorboard, VIEW, **selection, wi_edit="straggler%3D0")
    headline = frame.locator("[data-testid=whatif-headline]")
    headline.wait_for(timeout=TIMEOUT_MS)
    text = headline.inner_text()
    assert expected["resolved"][0] in text and fmt_duration(expected["predicted_us"]) in text
    rows = frame.locator("[data-testid=whatif-ranks] tbody tr")
    assert rows.count() == len(expected["ranks"])
    for i, rank in enumerate(expected["ranks"]):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[0] == rank["worker"] and cells[3] == fmt_duration(rank["predicted_us"])
    shot(page, artifacts, "whatif_run_panel")


def test_straggler_recommendation_opens_its_run_level_what_if(page, tensorboard, artifacts):
    """The straggler, first in each ddp_gloo worker's Overview, carries `rank:WORKER=0`: its
    What-if button opens the panel with it, which shows `/whatif/run`'s prediction."""
    selection = view_selection(tensorboard, need(tensorboard, "ddp_gloo"), "Overview")
    run = tensorboard.api("overview/run", run="ddp_gloo", span=selection["span"])
    (rec,) = run["recommendations"]
    assert rec["whatif"] == f"rank:{run['straggler']}=0"
    expected = tensorboard.api("whatif/run", run="ddp_gloo", span=selection["span"],
                               edit=rec["whatif"])
    frame = open_view(page, tensorboard, "Overview", **selection)
    first = frame.locator("[data-testid=recommendation]").first
    first.wait_for(timeout=TIMEOUT_MS)
    assert rec["title"] in first.inner_text()
    first.locator("[data-testid=rec-whatif]").click()
    frame.wait_for_selector("[data-testid='tab-GPU Idle'][aria-selected=true]")
    assert frame.input_value("[data-testid=whatif-edit]") == rec["whatif"]
    headline = frame.locator("[data-testid=whatif-headline]")
    headline.wait_for(timeout=TIMEOUT_MS)
    assert fmt_duration(expected["predicted_us"]) in headline.inner_text()
    shot(page, artifacts, "whatif_run_from_straggler")
