"""The GPU Idle view and recommendations v2 on every real trace and sample (the issue's
"done when" checks)."""

import csv
import io
import json

import pytest

from tb_plugin.analysis.overview import build_overview
from tb_plugin.load import load_trace
from tb_plugin.output.rows import csv_bytes
from tb_plugin.views.gpu_idle.spec import gpu_idle_rows
from tb_plugin.views.registry import build_view
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

from .helpers import trace_files


def _trace(name):
    [path] = sorted((SHARED_TRACES / name).glob("*.pt.trace.json*"))[:1]
    return load_trace(str(path), use_cache=False)


def _texts(items):
    return " ".join(f"{i['title']} {i['text']}" for i in items).lower()


@needs_shared
def test_alexnet_top_recommendation_is_the_captured_startup():
    items = build_overview(_trace("alexnet_gpu"))["recommendations"]
    top = items[0]
    assert top["id"] == "startup_captured" and top["severity"] == "high"
    assert "cudaDeviceGetStreamPriorityRange 29.9 s" in top["text"]
    assert "cudaFree 6.5 s" in top["text"]  # 6.55 s in the trace
    assert top["start_us"] is not None and top["end_us"] - top["start_us"] > 29e6
    assert "batch size" not in _texts(items)
    assert "low_gpu_utilization" not in [i["id"] for i in items]


@needs_shared
def test_amd_gets_no_tensor_core_advice_and_no_compute_capability():
    table = _trace("amd_mi250_rocm")
    items = build_overview(table)["recommendations"]
    text = _texts(items)
    assert "tensor core" not in text and "compute capability" not in text
    assert "matrix_units_unused" not in [i["id"] for i in items]  # its GEMMs are MFMA kernels
    payload = build_view(table, "gpu_idle")
    assert payload["vendor"] == "amd"
    assert "compute capability" not in json.dumps(payload).lower()


@needs_shared
def test_triton_names_the_foreign_step_marker():
    items = build_overview(_trace("triton_kernels"))["recommendations"]
    top = items[0]
    assert top["id"] == "foreign_step_marker"
    assert top["text"].startswith("ProfilerStep#1 was recorded by process 3100453, but this "
                                  "trace's operators run in process 1670242; it lasts 13.3 s")
    assert "batch size" not in _texts(items)


def _all_traces():
    files = [p for p in trace_files()]
    files += sorted(SAMPLES.glob("*/*.pt.trace.json*"))
    return files


@pytest.mark.parametrize("path", _all_traces(), ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_gpu_idle_on_every_trace(path):
    table = load_trace(str(path), use_cache=False)
    payload = build_view(table, "gpu_idle")
    json.dumps(payload)  # plain JSON
    rows = list(csv.DictReader(io.StringIO(csv_bytes(gpu_idle_rows, payload).decode())))
    assert {r["table"] for r in rows} >= {"launch"}
    if not payload["applicable"]:
        assert payload["message"] and payload["temporal"] == []
        return
    for dev in payload["temporal"]:  # the exclusive parts sum to the window
        parts = (dev["compute_us"] + dev["communication_us"] + dev["memory_us"]
                 + dev["idle_us"])
        assert parts == pytest.approx(dev["window_us"], rel=1e-9, abs=1e-6)
    for one in payload["critical_path"]["steps"]:  # the path's shares sum to the step
        assert sum(one["shares_us"].values()) == pytest.approx(one["length_us"], rel=1e-9,
                                                               abs=1e-3)
    assert "temporal" in {r["table"] for r in rows}
    for kind in payload["bandwidth"]["kinds"]:  # the true peak of a series is never below it
        series = payload["bandwidth"]["series"]["gbps"][kind["kind"]]
        assert kind["peak_gbps"] >= max(series) * (1 - 1e-9)
        assert (kind["mean_gbps"] is None) == (kind["busy_us"] == 0)  # mean needs busy time
        assert kind["peak_gbps"] >= (kind["mean_gbps"] or 0.0) * (1 - 1e-9)
