import json
import sys
import types

import pytest

from tb_plugin.analysis import report
from tb_plugin.analysis.breakdown import CATEGORIES
from tb_plugin.analysis.overview import build_overview, tensor_core_info
from tb_plugin.ingest import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import (
    cpu_op,
    kernel,
    make_table,
    memcpy,
    runtime,
    step,
    trace_files,
)

V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "totalGlobalMem": 34089730048,
        "computeMajor": 7, "computeMinor": 0, "numSms": 80, "maxThreadsPerMultiprocessor": 2048}
TC_MODULE = "tb_plugin.analysis.tensor_cores"


def _gpu_events():
    return [
        step(1, 0, 1000), step(2, 1000, 1000),
        cpu_op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 300,
               cat="user_annotation"),
        cpu_op("aten::conv2d", 400, 200, ext=1),
        runtime(410, 20, corr=1, ext=1),
        kernel(450, 300, corr=1, ext=1, device=0, **{"blocks per SM": 2.0,
                                                     "est. achieved occupancy %": 40}),
        cpu_op("aten::copy_", 1100, 100, ext=2),
        runtime(1110, 10, corr=2, ext=2, name="cudaMemcpyAsync"), memcpy(1150, 50, corr=2),
    ]


@pytest.fixture
def no_tensor_cores(monkeypatch):
    monkeypatch.setitem(sys.modules, TC_MODULE, None)  # makes the import fail


def _assert_plain_json(value, where="overview"):
    """Only JSON types (no numpy scalars) anywhere, so any encoder can write it."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, where
            _assert_plain_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _assert_plain_json(item, f"{where}[{i}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), (where, type(value))


def test_overview_contract(tmp_path, no_tensor_cores):
    overview = build_overview(make_table(_gpu_events(), tmp_path, deviceProperties=[V100]))
    _assert_plain_json(overview)
    json.dumps(overview, allow_nan=False)
    assert set(overview) >= {"steps", "average", "gpus", "recommendations", "environment",
                             "categories"}
    assert [s["name"] for s in overview["steps"]] == ["1", "2"]
    for entry in overview["steps"]:
        assert list(entry["breakdown_us"]) == list(CATEGORIES)
        assert sum(entry["breakdown_us"].values()) == pytest.approx(entry["total_us"])
    first = overview["steps"][0]["breakdown_us"]
    assert first["DataLoader"] == 300 and first["Kernel"] == 300 and first["Runtime"] == 20
    assert overview["average"]["total_us"] == 1000
    assert overview["average"]["breakdown_us"]["Memcpy"] == 25
    assert overview["categories"] == ["Kernel", "Memcpy", "Memset", "Runtime", "DataLoader",
                                      "CPU Exec", "Other"]
    assert overview["environment"]["device_type"] == "GPU"
    [gpu] = overview["gpus"]
    assert gpu == {
        "id": 0, "name": "Tesla V100-SXM2-32GB", "memory_gb": 31.75, "compute_capability": "7.0",
        "utilization_pct": pytest.approx(15.0), "sm_efficiency_pct": pytest.approx(15.0),
        "achieved_occupancy_pct": pytest.approx(40.0), "tensor_core_pct": None,
    }
    ids = [r["id"] for r in overview["recommendations"]]
    assert "dataloader" in ids and "low_gpu_utilization" in ids and "mixed_precision" not in ids


def test_cpu_only_overview(tmp_path, no_tensor_cores):
    table = make_table([step(1, 0, 100), cpu_op("aten::add", 10, 10),
                        cpu_op("gloo:all_reduce", 30, 20, cat="user_annotation")], tmp_path)
    overview = build_overview(table)
    assert overview["environment"]["device_type"] == "CPU" and overview["gpus"] == []
    assert overview["categories"] == ["Communication", "DataLoader", "CPU Exec", "Other"]
    assert overview["average"]["breakdown_us"]["Communication"] == 20


def test_fallback_step_is_noted(tmp_path, no_tensor_cores):
    overview = build_overview(make_table([cpu_op("aten::add", 10, 10)], tmp_path))
    assert [s["name"] for s in overview["steps"]] == ["0"]
    assert any("ProfilerStep" in note for note in overview["notes"])


def test_empty_trace_overview(tmp_path, no_tensor_cores):
    overview = build_overview(make_table([], tmp_path))
    assert overview["steps"] == [] and overview["average"]["total_us"] == 0.0
    assert overview["recommendations"] == [] and overview["gpus"] == []
    json.dumps(overview, allow_nan=False)


def test_tensor_core_summary_is_used_when_available(tmp_path, monkeypatch):
    fake = types.ModuleType(TC_MODULE)
    fake.tensor_core_summary = lambda table: {"kernel_tc_ratio": 0.0,
                                              "tc_eligible_ops_kernel_ratio": 0.5,
                                              "tc_ratio_by_device": {0: 0.25}}
    monkeypatch.setitem(sys.modules, TC_MODULE, fake)
    overview = build_overview(make_table(_gpu_events(), tmp_path, deviceProperties=[V100]))
    assert overview["gpus"][0]["tensor_core_pct"] == pytest.approx(25.0)
    [amp] = [r for r in overview["recommendations"] if r["id"] == "mixed_precision"]
    assert amp["metric"] == pytest.approx(50.0)


def test_failing_tensor_core_summary_degrades(tmp_path, monkeypatch):
    fake = types.ModuleType(TC_MODULE)
    fake.tensor_core_summary = lambda table: 1 / 0
    monkeypatch.setitem(sys.modules, TC_MODULE, fake)
    table = make_table(_gpu_events(), tmp_path, deviceProperties=[V100])
    assert tensor_core_info(table) is None
    assert build_overview(table)["gpus"][0]["tensor_core_pct"] is None


def test_build_view_dispatch(tmp_path, monkeypatch, no_tensor_cores):
    table = make_table(_gpu_events(), tmp_path)
    assert report.build_view(table, "overview") == build_overview(table)
    calls = []
    for view, module, function in (("operators", "operators", "build_operators"),
                                   ("kernels", "kernels", "build_kernels")):
        fake = types.ModuleType(f"tb_plugin.analysis.{module}")
        setattr(fake, function, lambda t, **kw: calls.append((t, kw)) or {"view": kw})
        monkeypatch.setitem(sys.modules, f"tb_plugin.analysis.{module}", fake)
        assert report.build_view(table, view, group_by="X") == {"view": {"group_by": "X"}}
    assert [kw for _, kw in calls] == [{"group_by": "X"}] * 2 and calls[0][0] is table
    with pytest.raises(KeyError, match="known views: overview, operators, kernels"):
        report.build_view(table, "nope")
    with pytest.raises(TypeError):
        report.build_view(table, "overview", group_by="X")
    assert set(report.VIEWS) >= {"overview", "operators", "kernels"}


TRACES = SHARED_TRACES
GOLDEN = {"Kernel": 98589, "Memcpy": 1915, "Memset": 89, "Runtime": 2908, "DataLoader": 59262,
          "CPU Exec": 13674, "Other": 1156}


@needs_shared
def test_resnet50_golden_overview():
    table = load_trace(str(TRACES / "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"),
                       use_cache=False)
    overview = report.build_view(table, "overview")
    assert [s["name"] for s in overview["steps"]] == ["5", "6", "7", "8", "9", "10"]
    assert overview["average"]["total_us"] == pytest.approx(177592, rel=0.005)
    for category, expected in GOLDEN.items():
        assert overview["average"]["breakdown_us"][category] == pytest.approx(expected, rel=0.005)
    assert "Communication" not in overview["categories"]
    [gpu] = overview["gpus"]
    assert gpu["utilization_pct"] == pytest.approx(55.51, abs=0.1)
    assert gpu["sm_efficiency_pct"] == pytest.approx(54.68, abs=0.1)
    assert gpu["achieved_occupancy_pct"] == pytest.approx(49.13, abs=0.1)
    assert gpu["name"] == "Tesla V100-DGXS-32GB" and gpu["compute_capability"] == "7.0"
    items = {r["id"]: r for r in overview["recommendations"]}
    assert items["dataloader"]["metric"] == pytest.approx(33.4, abs=0.05)
    assert items["dataloader"]["severity"] == "high"
    assert "low_gpu_utilization" not in items
    if tensor_core_info(table) is not None:  # wired once the operators work lands
        assert gpu["tensor_core_pct"] == pytest.approx(0.0)
        assert items["mixed_precision"]["metric"] == pytest.approx(68, abs=0.5)


@needs_shared
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_real_trace_overviews(path):
    overview = report.build_view(load_trace(str(path), use_cache=False), "overview")
    json.dumps(overview, allow_nan=False)
    _assert_plain_json(overview)
    assert overview["steps"]
    for entry in overview["steps"]:
        assert sum(entry["breakdown_us"].values()) == pytest.approx(entry["total_us"], rel=1e-9,
                                                                   abs=1e-6)
