"""Labelled advice: for real traces, the recommendation that must come first, the ones that must
appear, and the ones that must not (the suite fails on any forbidden one), plus rules every
trace must obey (no "use graphs" on graph traces, no FSDP advice without FSDP, no NVIDIA words on
AMD, no utilisation advice on a graph capture, every priced item carries its saving).

Labels were set by reading each trace, not by running the rules: e.g. alexnet's profile holds
CUDA start-up (the profile itself is the first problem); the vLLM/SGLang `capture/` traces hold
kernels that never ran; ResNet-50 on a V100 keeps its queue full (launch overhead costs nothing)
and spends a third of the step in the DataLoader; on both SGLang traces the first kernels after
the window opens are launched at once but start ~0.46-0.49 s later while the host blocks in a
copy (the GPU held queued work: not the host's doing, not the batch size's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tb_plugin.analysis.distributed.summary import is_fsdp
from tb_plugin.analysis.graphs import graph_summary
from tb_plugin.analysis.overview import build_overview
from tb_plugin.analysis.vendor import trace_vendor
from tb_plugin.load import load_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

#: Per trace (path under ../shared/traces or samples/): the id that must come first (None: no
#: label for the order), the ids that must appear, the ids that must not.
IDLE_ADVICE = {"host_bound", "launch_bound", "device_sync", "low_gpu_utilization",
               "host_compute"}
SHARED_LABELS = {
    "alexnet_gpu/worker0.1695835535000.pt.trace.json.gz":
        ("startup_captured", {"host_bound"}, {"low_gpu_utilization"}),
    "amd_mi250_rocm/worker0.1700000000000.pt.trace.json.gz":
        ("host_bound", set(), {"launch_bound", "low_gpu_utilization"}),
    "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz":
        ("dataloader", {"matrix_units_unused"},
         {"launch_bound", "device_sync", "low_gpu_utilization"}),
    "resnet50_gpu_pt19/worker0.1623143566756.pt.trace.json.gz":
        ("dataloader", {"matrix_units_unused"},
         {"launch_bound", "device_sync", "low_gpu_utilization"}),
    "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz":
        ("communication_not_overlapped", set(), IDLE_ADVICE),
    "triton_kernels/worker0.1700000000000.pt.trace.json.gz":
        ("foreign_step_marker", set(), {"host_compute", "low_gpu_utilization"}),
    "tl_vllm_decode_fullgraph/capture/rank0.pt.trace.json.gz": (None, set(), IDLE_ADVICE),
    "tl_sglang_decode/capture/bs_32_rank0.pt.trace.json.gz": (None, set(), IDLE_ADVICE),
    "tl_vllm_decode_fullgraph/replay.pt.trace.json.gz": (None, set(), {"launch_bound"}),
    "tl_sglang_decode/worker0.pt.trace.json.gz":
        ("device_stalled", set(), {"launch_bound", "host_bound", "low_gpu_utilization"}),
    "tl_sglang_prefilldecode/worker0.pt.trace.json.gz":
        ("device_stalled", set(), {"launch_bound", "host_bound", "low_gpu_utilization"}),
}
SAMPLE_LABELS = {  # CPU-only runs: nothing about a GPU
    run: (None, set(), IDLE_ADVICE | {"matrix_units_unused", "memory_limit", "nccl_backend"})
    for run in ("cnn_bs32", "cnn_bs64", "compiled_cpu", "ddp_gloo")
}


def _ids(items: list[dict]) -> list[str]:
    return [item["id"] for item in items]


def _check_labels(items: list[dict], must: set, forbidden: set) -> None:
    ids = _ids(items)
    assert must <= set(ids), ids
    assert not forbidden & set(ids), ids


def _check_rules(path: Path, items: list[dict]) -> None:
    table = load_trace(str(path), use_cache=False)
    mode, vendor, fsdp = graph_summary(table)["mode"], trace_vendor(table), is_fsdp(table)
    text = " ".join(item["text"] for item in items)
    if mode != "none":
        assert "CUDA/HIP graph" not in text and "CUDA graphs" not in {
            link["label"] for item in items for link in item["links"]}, (path, _ids(items))
    if mode == "capture":
        assert not IDLE_ADVICE & set(_ids(items)), (path, _ids(items))
    if not fsdp:
        assert "FSDP" not in text, (path, _ids(items))
    if vendor == "amd":
        assert "Tensor Core" not in text and "compute capability" not in text
    for item in items:
        assert (item["saving_us"] is None) == (item["saving_pct"] is None)
        if item["saving_pct"] is not None:
            assert item["saving_us"] >= 0 and 0 <= item["saving_pct"] <= 100.0 + 1e-6, item


@needs_shared
@pytest.mark.parametrize("name", sorted(SHARED_LABELS))
def test_shared_trace_advice(name):
    path = SHARED_TRACES / name
    items = build_overview(load_trace(str(path), use_cache=False))["recommendations"]
    _check_labels(items, *SHARED_LABELS[name][1:])
    _check_rules(path, items)


@needs_shared
@pytest.mark.parametrize("name", sorted(n for n, label in SHARED_LABELS.items() if label[0]))
def test_shared_trace_first_advice(name):
    items = build_overview(load_trace(str(SHARED_TRACES / name), use_cache=False))[
        "recommendations"]
    assert _ids(items)[:1] == [SHARED_LABELS[name][0]]


@needs_shared
def test_every_shared_trace_obeys_the_rules():
    paths = sorted(p for p in SHARED_TRACES.glob("**/*.pt.trace.json*")
                   if "memory_timeline" not in p.name)
    assert len(paths) >= len(SHARED_LABELS)
    for path in paths:
        _check_rules(path, build_overview(load_trace(str(path), use_cache=False))[
            "recommendations"])


@pytest.mark.parametrize("run", sorted(SAMPLE_LABELS))
def test_sample_advice(run):
    paths = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    assert paths, run
    for path in paths:
        items = build_overview(load_trace(str(path), use_cache=False))["recommendations"]
        _check_labels(items, *SAMPLE_LABELS[run][1:])
        _check_rules(path, items)
