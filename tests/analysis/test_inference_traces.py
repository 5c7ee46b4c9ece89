"""The Inference view on the shared serving traces (issue 25 item 4): the phases and counts are
read by hand from the annotation names written below, the GPU time of each step is re-derived
from the raw JSON (and agrees with TraceLens's own busy time), the prefill's bytes from its
operators' shapes by hand."""

import csv
import gzip
import json

import pytest

from tb_plugin.analysis.features import features
from tb_plugin.analysis.gpu_idle.idle import temporal_breakdown
from tb_plugin.analysis.inference.view import build_inference
from tb_plugin.api import open_logdir
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: trace -> (annotations, phase, requests, tokens, KV tokens attended, source), by hand from
#: the names: `execute_32_context_0(..)_generation_32(sq32sk55086..)`, the same with sk32785
#: around `step[DECODE bs=32]`, `execute_15360_context_15(sq15360sk15360..)_generation_0(..)`
#: around `step[EXTEND bs=15 toks=15360]`.
EXPECTED = {
    "tl_vllm_decode_fullgraph/replay.pt.trace.json.gz": (1, "decode", 32, 32, 55086, "vllm"),
    "tl_sglang_decode/worker0.pt.trace.json.gz": (2, "decode", 32, 32, 32785, "vllm+sglang"),
    "tl_sglang_prefilldecode/worker0.pt.trace.json.gz":
        (2, "prefill", 15, 15360, 15360, "vllm+sglang"),
}
CAPTURES = ["tl_vllm_decode_fullgraph/capture/rank0.pt.trace.json.gz",
            "tl_sglang_decode/capture/bs_32_rank0.pt.trace.json.gz"]


def _raw(name):
    with gzip.open(SHARED_TRACES / name) as f:
        return json.load(f)["traceEvents"]


def _busy_us(events):
    """GPU busy time of the outermost serving annotation: the union of the device events whose
    launch call (same correlation) starts inside it on its thread; a plain sweep."""
    anns = [e for e in events if e.get("cat") == "user_annotation"
            and (e["name"].startswith("execute_") or e["name"].startswith("step["))]
    outer = max(anns, key=lambda e: e["dur"])
    calls = {e["args"]["correlation"] for e in events
             if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X" and e["tid"] == outer["tid"]
             and outer["ts"] <= e["ts"] < outer["ts"] + outer["dur"]}
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") in DEVICE_CATS and e["args"].get("correlation") in calls)
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _tracelens_busy_us(name):
    with open(SHARED_TRACES / name.split("/")[0] / "tracelens_outputs" / "gpu_timeline.csv") as f:
        return {r["type"]: float(r["time ms"]) * 1e3 for r in csv.DictReader(f)}["busy_time"]


@needs_shared
@pytest.mark.parametrize("name", list(EXPECTED))
def test_phases_and_counts_on_the_serving_traces(name):
    annotations, phase, requests, tokens, kv, source = EXPECTED[name]
    table = load_trace(str(SHARED_TRACES / name), use_cache=False)
    assert features(table)["serving_steps"] == annotations  # the tab is shown
    payload = build_inference(table)
    [step] = payload["steps"]
    assert (step["phase"], step["requests"], step["tokens"], step["kv_tokens"],
            step["source"], step["state"]) == (phase, requests, tokens, kv, source, "steady")
    # GPU time: the raw sweep, and TraceLens's busy time of the same trace (its window holds
    # only this step's work), within rounding on a ~5e12 us clock
    events = _raw(name)
    assert step["gpu_us"] == pytest.approx(_busy_us(events), abs=0.05)
    assert step["gpu_us"] == pytest.approx(_tracelens_busy_us(name), abs=0.05)
    assert step["us_per_token"] == pytest.approx(step["gpu_us"] / tokens, rel=1e-12)
    [summary] = payload["phases"]
    assert summary["phase"] == phase and summary["tokens"] == tokens
    if phase == "decode":  # one token per running request and step
        assert summary["inter_token_latency_us"] == step["gpu_us"]
    # every device event of the trace is the step's (durations are end - start on a ~5e12 us
    # clock: float64's step there is ~1e-3 us per event)
    device = [e["dur"] for e in events if e.get("cat") in DEVICE_CATS]
    assert sum(c["time_us"] for c in summary["categories"]) == pytest.approx(
        sum(device), abs=2e-3 * len(device))


@needs_shared
def test_prefill_bytes_from_the_shapes():
    """Qwen3-8B prefill (the operators' Input Dims): per layer aten::mm weights 4096x6144,
    4096x4096, 4096x24576, 12288x4096, 36 layers, plus the 4096x151936 logits GEMM, bf16;
    36 store_cache calls writing K and V rows of 1024 bf16 per token: 36 x 4096 B per token,
    x 15360 attended tokens."""
    weights = (36 * (4096 * 6144 + 4096 * 4096 + 4096 * 24576 + 12288 * 4096)
               + 4096 * 151936) * 2
    kv = 36 * (1024 + 1024) * 2 * 15360
    table = load_trace(str(SHARED_TRACES / "tl_sglang_prefilldecode/worker0.pt.trace.json.gz"),
                       use_cache=False)
    payload = build_inference(table)
    [step] = payload["steps"]
    assert step["bytes"] == weights + kv == 17_401_118_720
    assert payload["device"]["peaks_model"] == "MI300X"
    assert step["bandwidth_pct"] == pytest.approx(
        100 * (weights + kv) / (step["gpu_us"] * 1e-6) / 5.3e12, rel=1e-12)


@needs_shared
@pytest.mark.parametrize("name, missing", [
    ("tl_vllm_decode_fullgraph/replay.pt.trace.json.gz", "no KV-cache write"),
    ("tl_sglang_decode/worker0.pt.trace.json.gz", "no GEMM"),
])
def test_decode_bandwidth_of_a_graph_replay_is_not_estimable(name, missing):
    """The replays' operators (and their shapes) are in the capture traces: the view says so
    rather than guessing."""
    payload = build_inference(load_trace(str(SHARED_TRACES / name), use_cache=False))
    [step] = payload["steps"]
    assert step["bytes"] is None and step["bandwidth_pct"] is None
    assert step["bytes_reason"].startswith(missing)
    assert step["bytes_reason"].endswith("(a CUDA/HIP graph replay: its operators and shapes "
                                         "are in the capture trace)")
    assert any(n.startswith("Decode memory bandwidth is not estimable") for n in
               payload["notes"])


@needs_shared
@pytest.mark.parametrize("name", CAPTURES)
def test_capture_traces_are_not_serving_traces(name):
    """Their `capture_32_FULL` / `capture_32_DECODE` annotations are no serving step: no tab."""
    table = load_trace(str(SHARED_TRACES / name), use_cache=False)
    assert features(table)["serving_steps"] == 0
    assert build_inference(table)["total_steps"] == 0


@needs_shared
@pytest.mark.parametrize("name", list(EXPECTED))
def test_gpu_timeline_matches_tracelens(name):
    """The GPU Idle view's temporal breakdown against TraceLens's gpu_timeline.csv of the same
    trace (bench/tracelens_categories.py prints both): computation, exposed memcpy, idle and
    total time agree to rounding (its CSV keeps ~1e-10 ms)."""
    with open(SHARED_TRACES / name.split("/")[0] / "tracelens_outputs" / "gpu_timeline.csv") as f:
        peer = {r["type"]: float(r["time ms"]) * 1e3 for r in csv.DictReader(f)}
    [gpu] = temporal_breakdown(load_trace(str(SHARED_TRACES / name), use_cache=False))
    for ours, theirs in (("compute_us", "computation_time"), ("memory_us", "exposed_memcpy_time"),
                         ("communication_us", "exposed_comm_time"), ("idle_us", "idle_time"),
                         ("window_us", "total_time")):
        assert gpu[ours] == pytest.approx(peer[theirs], abs=1e-3), ours


@needs_shared
def test_sglang_decode_bandwidth_with_its_capture():
    """Through `Logdir.inference`, the SGLang decode replay reads its capture run: the
    captured Qwen3-8B operators at batch 32 (the same four GEMM weights per layer x 36 and the
    4096x151936 logits GEMM, bf16) and 36 store_cache writes of 1024 + 1024 bf16 per token,
    x 32,785 KV tokens (the annotation's sk): 15,136,194,560 + 4,834,344,960 bytes; on the
    MI300X's 5.3 TB/s over the step's GPU time."""
    weights = (36 * (4096 * 6144 + 4096 * 4096 + 4096 * 24576 + 12288 * 4096)
               + 4096 * 151936) * 2
    kv = 36 * (1024 + 1024) * 2 * 32785
    payload = open_logdir(str(SHARED_TRACES), use_cache=False).inference("tl_sglang_decode")
    [step] = payload["steps"]
    assert step["bytes"] == weights + kv == 19_970_539_520
    assert step["bandwidth_pct"] == pytest.approx(
        100 * (weights + kv) / (step["gpu_us"] * 1e-6) / 5.3e12, rel=1e-12)
    [decode] = payload["phases"]
    assert decode["bandwidth_steps"] == 1 and decode["bandwidth_pct"] == step["bandwidth_pct"]
    assert payload["notes"] == []


@needs_shared
def test_vllm_decode_moe_weights_are_not_sized():
    """The vLLM GPT-OSS decode: with its capture read, 7.2 ms of its GEMM kernels were
    captured by vllm::moe_forward (Triton matmul_ogs on MXFP4 experts), whose weights no
    aten::mm shape tells: not estimable, and said why. Its categories now follow the captured
    operators, as bench/tracelens_categories.py: attention 860.8 us (TraceLens's
    InferenceAttention), reduction 119.8 (TopK) + 136.9 (the MoE finalize) us."""
    payload = open_logdir(str(SHARED_TRACES), use_cache=False).inference(
        "tl_vllm_decode_fullgraph")
    [step] = payload["steps"]
    assert step["bytes"] is None
    assert step["bytes_reason"] == (
        "GEMM kernels launched outside aten::mm/addmm (vllm::moe_forward): their weights "
        "cannot be sized (a CUDA/HIP graph replay, its capture trace read too)")
    cats = {c["category"]: c["time_us"] for c in payload["phases"][0]["categories"]}
    assert cats["attention"] == pytest.approx(860.8, abs=0.05)
    assert cats["reduction"] == pytest.approx(119.8 + 136.9, abs=0.1)
