"""CUDA/HIP graphs on the shared serving traces (issue 25 "done when"): every number is
re-derived here from the raw JSON, independently of the parser and the analyses."""

import csv
import gzip
import json
import re

import pytest

from tb_plugin.analysis.gpu_idle.critical_path import critical_paths
from tb_plugin.analysis.gpu_idle.launch_stats import launch_stats
from tb_plugin.analysis.gpu_idle.view import build_gpu_idle
from tb_plugin.analysis.graphs import graph_summary, merge_capture
from tb_plugin.analysis.kernels import GROUP_BY_KERNEL_OP, kernel_table
from tb_plugin.analysis.overview import build_overview
from tb_plugin.api import NotFoundError, open_logdir
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

PAIRS = {  # replay -> its capture (the `capture/` subfolder beside it)
    "tl_vllm_decode_fullgraph/replay.pt.trace.json.gz":
        "tl_vllm_decode_fullgraph/capture/rank0.pt.trace.json.gz",
    "tl_sglang_decode/worker0.pt.trace.json.gz":
        "tl_sglang_decode/capture/bs_32_rank0.pt.trace.json.gz",
}
SERVING = [*PAIRS, "tl_sglang_prefilldecode/worker0.pt.trace.json.gz"]
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")


def _raw(name):
    with gzip.open(SHARED_TRACES / name) as f:
        return json.load(f)["traceEvents"]


def _load(name):
    return load_trace(str(SHARED_TRACES / name), use_cache=False)


def _graph_facts(events):
    """Graph launch calls, and the kernels with their correlation id, from the raw events."""
    launches = [e for e in events if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X"
                and re.fullmatch(r"(cuda|hip|cu)GraphLaunch(_v\d+)?", e["name"])]
    corr = {e["args"]["correlation"] for e in launches}
    kernels = [e for e in events if e.get("cat") == "kernel"
               and e["args"].get("correlation") in corr]
    return launches, kernels


@needs_shared
@pytest.mark.parametrize("name", SERVING)
def test_launch_time_is_at_most_the_launch_calls(name):
    """Σ cpu of the launch statistics ≤ Σ durations of the calls that launched kernels (each
    call once); on graph traces the graph launch calls' sum is exactly the raw one."""
    events = _raw(name)
    kernel_corr = {e["args"].get("correlation") for e in events if e.get("cat") == "kernel"}
    calls = [e for e in events if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X"
             and e["args"].get("correlation") in kernel_corr]
    table = _load(name)
    stats = launch_stats(table, runtime_cutoff_us=50.0, delay_cutoff_us=100.0)
    # durations are end − start on a ~5e12 us clock: float64's step there is ~1e-3 us
    slack = 2e-3 * len(calls)
    assert stats["cpu_us_total"] <= sum(e["dur"] for e in calls) + slack
    assert stats["cpu_us_total"] == pytest.approx(sum(e["dur"] for e in calls), abs=slack)
    # the critical path's launch share too (the SGLang traces' 463 and 493 ms waits behind
    # another stream's event are backlog, not launch)
    for step in critical_paths(table)["steps"]:
        assert step["shares_us"]["launch"] <= sum(e["dur"] for e in calls) + slack
    launches, kernels = _graph_facts(events)
    s = graph_summary(table)
    assert s["launches"] == len(launches)
    assert s["launch_us"] == pytest.approx(sum(e["dur"] for e in launches), abs=1e-3)
    assert s["replayed_kernels"] == len(kernels)  # durations: end − start at ts ~6e12 us
    assert s["replayed_kernel_us"] == pytest.approx(sum(e["dur"] for e in kernels), rel=1e-5)
    assert s["mode"] == ("replay" if kernels else "none")


@needs_shared
@pytest.mark.parametrize("name", list(PAIRS))
def test_replayed_kernels_are_attributed(name):
    """≥ 90% of the replayed kernel time is attributed; the graph launch is not advised to be
    a graph ("launch_bound" is gone: the launch is charged once)."""
    table = _load(name)
    s = graph_summary(table)
    assert s["replayed_kernel_us"] > 0
    assert s["attributed_kernel_us"] >= 0.9 * s["replayed_kernel_us"]
    ids = [r["id"] for r in build_overview(table)["recommendations"]]
    assert "launch_bound" not in ids
    # the Kernel view shows it too: N/A holds less than 10% of the replayed time
    frame = kernel_table(table, GROUP_BY_KERNEL_OP)
    na = frame.loc[frame["operator"] == "N/A", "total_us"].sum()
    assert na < 0.1 * s["replayed_kernel_us"]


@needs_shared
@pytest.mark.parametrize("replay, capture", list(PAIRS.items()))
def test_capture_pairs_with_its_replay(replay, capture):
    """The capture trace: launch/copy calls between Begin/EndCapture (raw, by time on the same
    thread) are as many as the replayed kernels, so every replayed kernel gets the operator
    that captured it; the capture trace is labelled and has no utilization or MFU."""
    raw = _raw(capture)
    calls = [e for e in raw if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X"]
    [begin] = [e for e in calls if e["name"].endswith("StreamBeginCapture")]
    [end] = [e for e in calls if e["name"].endswith("StreamEndCapture")]
    captured = [e for e in calls if e["tid"] == begin["tid"]
                and begin["ts"] <= e["ts"] < end["ts"] + end["dur"]
                and re.search("Launch|Memcpy|Memset", e["name"])]
    _, kernels = _graph_facts(_raw(replay))
    assert len(captured) == len(kernels)
    capture_table = _load(capture)
    s = graph_summary(capture_table)
    assert (s["mode"], s["captured_launches"]) == ("capture", len(captured))
    merged = merge_capture(_load(replay), capture_table)
    assert len(merged) == len(kernels) and (merged["window"] == 0).all()
    named = merged.loc[merged["captured_by"] != "", "dur_us"].sum()
    assert named >= 0.9 * merged["dur_us"].sum()
    overview = build_overview(capture_table)
    assert all(g["utilization_pct"] is None and g["mfu_pct"] is None for g in overview["gpus"])
    assert build_gpu_idle(capture_table)["applicable"] is False


@needs_shared
def test_python_api_pairs_the_capture_run():
    """`Logdir.graph_kernels` finds `<run>/capture` and gives the captured operator per
    replayed kernel: vllm::moe_forward's kernels sum to 7171.53 us, the figure TraceLens's
    ops_summary gives for it (its own merge of the same pair); a run without a capture run
    is a NotFoundError naming the run it looked for."""
    logdir = open_logdir(str(SHARED_TRACES), use_cache=False)
    frame = logdir.graph_kernels("tl_vllm_decode_fullgraph")
    with open(SHARED_TRACES / "tl_vllm_decode_fullgraph/tracelens_outputs/ops_summary.csv") as f:
        peer = {r["name"]: float(r["total_direct_kernel_time_sum"]) for r in csv.DictReader(f)}
    ours = frame.groupby("captured_by")["dur_us"].sum()
    assert ours["vllm::moe_forward"] == pytest.approx(peer["vllm::moe_forward"], abs=0.05)
    assert ours["aten::addmm"] == pytest.approx(peer["aten::addmm"], abs=0.05)
    assert logdir.trace("tl_vllm_decode_fullgraph").graphs()["mode"] == "replay"
    with pytest.raises(NotFoundError, match="tl_sglang_prefilldecode/capture"):
        logdir.graph_kernels("tl_sglang_prefilldecode")
