import json

import pytest

from tb_plugin.analysis.breakdown import CATEGORIES
from tb_plugin.analysis.kernels import GROUP_BY_KERNEL_OP, build_kernels
from tb_plugin.analysis.operators import GROUP_BY_INPUT_SHAPE, build_operators
from tb_plugin.analysis.overview import build_overview
from tb_plugin.load import load_trace
from tb_plugin.views.errors import OptionError
from tb_plugin.views.registry import build_view
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


def _gpu_events():
    return [
        step(1, 0, 1000), step(2, 1000, 1000),
        cpu_op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 0, 300,
               cat="user_annotation"),
        cpu_op("aten::conv2d", 400, 200, ext=1, flops=1.57e9),
        runtime(410, 20, corr=1, ext=1),
        kernel(450, 300, corr=1, ext=1, device=0, **{"blocks per SM": 2.0,
                                                     "est. achieved occupancy %": 40}),
        cpu_op("aten::copy_", 1100, 100, ext=2),
        runtime(1110, 10, corr=2, ext=2, name="cudaMemcpyAsync"), memcpy(1150, 50, corr=2),
    ]


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


def test_overview_contract(tmp_path):
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
        "achieved_occupancy_pct": pytest.approx(40.0), "tensor_core_pct": 0.0,  # no TC kernel
        "vendor": "NVIDIA", "architecture": "Volta (sm_70)", "peaks_model": "V100",
        # the conv's recorded 1.57e9 FLOPs ran on a plain (non-tensor-core) kernel with no dtype
        # recorded: the V100 fp32 peak, 15.7 TFLOP/s, would need 100 us of the 2000 us of steps
        "mfu_pct": pytest.approx(1.57e9 / 15.7e12 / 2000e-6 * 100),  # 5 %
        "mbu_pct": 0.0,  # no operator with a bytes formula (no input shapes recorded)
        "matrix_units": "tensor cores",
        "peaks_reason": None,
    }
    items = {r["id"]: r for r in overview["recommendations"]}
    # the GPU (busy 300 + 50 of [450, 1200)) idles 400/750 = 53.3%, all of it host wait (the
    # copy was launched at 1110, after the kernel ended at 750): host-bound, so low
    # utilization is not the cause to report (recommendations v2)
    assert "dataloader" in items and "low_gpu_utilization" not in items
    assert items["host_bound"]["metric"] == pytest.approx(53.33)
    # aten::conv2d is TC-eligible and launched all the kernel time, none on tensor cores
    assert items["matrix_units_unused"]["metric"] == pytest.approx(100.0)


def test_cpu_only_overview(tmp_path):
    table = make_table([step(1, 0, 100), cpu_op("aten::add", 10, 10),
                        cpu_op("gloo:all_reduce", 30, 20, cat="user_annotation")], tmp_path)
    overview = build_overview(table)
    assert overview["environment"]["device_type"] == "CPU" and overview["gpus"] == []
    assert overview["categories"] == ["Communication", "DataLoader", "CPU Exec", "Other"]
    assert overview["average"]["breakdown_us"]["Communication"] == 20


def test_fallback_step_is_noted(tmp_path):
    overview = build_overview(make_table([cpu_op("aten::add", 10, 10)], tmp_path))
    assert [s["name"] for s in overview["steps"]] == ["0"]
    assert any("ProfilerStep" in note for note in overview["notes"])


def test_empty_trace_overview(tmp_path):
    overview = build_overview(make_table([], tmp_path))
    assert overview["steps"] == [] and overview["average"]["total_us"] == 0.0
    assert overview["recommendations"] == [] and overview["gpus"] == []
    json.dumps(overview, allow_nan=False)


def test_tensor_core_share_per_gpu(tmp_path):
    """The real tensor-core summary: 300 of 400 us of device 0's kernels ran on tensor cores."""
    events = _gpu_events()
    events[5] = kernel(450, 300, corr=1, ext=1, device=0, name="volta_h884gemm_64x64_ldg8_nn")
    events += [runtime(1120, 5, corr=3, ext=2), kernel(1160, 100, corr=3, ext=2, device=0)]
    overview = build_overview(make_table(events, tmp_path, deviceProperties=[V100]))
    assert overview["gpus"][0]["tensor_core_pct"] == pytest.approx(75.0)
    ids = [r["id"] for r in overview["recommendations"]]
    assert "matrix_units_unused" not in ids  # some kernels already use tensor cores


def test_build_view_dispatch(tmp_path):
    """The registry's builders are the analysis builders, with the options validated."""
    table = make_table(_gpu_events(), tmp_path)
    assert build_view(table, "overview") == build_overview(table)
    by_shape = build_view(table, "operators", group_by=GROUP_BY_INPUT_SHAPE)
    assert by_shape == build_operators(table, group_by=GROUP_BY_INPUT_SHAPE)
    assert {row["name"] for row in by_shape["rows"]} == {"aten::conv2d", "aten::copy_"}
    by_op = build_view(table, "kernels", group_by=GROUP_BY_KERNEL_OP)
    assert by_op == build_kernels(table, group_by=GROUP_BY_KERNEL_OP)
    assert [(row["name"], row["operator"]) for row in by_op["rows"]] == [
        ("void gemm_kernel<float>()", "aten::conv2d")]
    with pytest.raises(KeyError, match="nope"):
        build_view(table, "nope")
    with pytest.raises(OptionError, match="group_by not taken by the overview view"):
        build_view(table, "overview", group_by="X")


TRACES = SHARED_TRACES
GOLDEN = {"Kernel": 98589, "Memcpy": 1915, "Memset": 89, "Runtime": 2908, "DataLoader": 59262,
          "CPU Exec": 13674, "Other": 1156}


@needs_shared
def test_resnet50_golden_overview():
    table = load_trace(str(TRACES / "resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"),
                       use_cache=False)
    overview = build_view(table, "overview")
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
    assert gpu["tensor_core_pct"] == pytest.approx(0.0)
    assert items["matrix_units_unused"]["metric"] == pytest.approx(68, abs=0.5)


@needs_shared
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: f"{p.parent.name}/{p.name[:12]}")
def test_real_trace_overviews(path):
    overview = build_view(load_trace(str(path), use_cache=False), "overview")
    json.dumps(overview, allow_nan=False)
    _assert_plain_json(overview)
    assert overview["steps"]
    for entry in overview["steps"]:
        assert sum(entry["breakdown_us"].values()) == pytest.approx(entry["total_us"], rel=1e-9,
                                                                   abs=1e-6)
