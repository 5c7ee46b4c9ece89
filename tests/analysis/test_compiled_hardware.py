"""torch.compile regions on real traces (oracles read from the raw JSON here), vendor and
peaks matching, AMD matrix cores, and ROCm work-item grids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_plugin.analysis.efficiency.compiled import build_compiled, fused_ops
from tb_plugin.analysis.efficiency.hardware import (
    architecture,
    compute_capability,
    device_vendor,
    match_peaks,
)
from tb_plugin.analysis.efficiency.roofline import build_roofline
from tb_plugin.analysis.efficiency.tensor_cores import kernel_uses_tensor_cores
from tb_plugin.analysis.kernels import build_kernel_pies, kernel_table
from tb_plugin.analysis.overview import build_overview
from tb_plugin.load import load_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, runtime

pytestmark = pytest.mark.unit

MI300 = SHARED_TRACES / "tl_mi300_torch_compile_triton" / "worker0.pt.trace.json.gz"
TRITON = SHARED_TRACES / "triton_kernels" / "worker0.1700000000000.pt.trace.json.gz"
MI250 = SHARED_TRACES / "amd_mi250_rocm" / "worker0.1700000000000.pt.trace.json.gz"
VLLM_CAPTURE = SHARED_TRACES / "tl_vllm_decode_fullgraph" / "capture" / "rank0.pt.trace.json.gz"


def _raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


@needs_shared
@pytest.mark.parametrize("path", [MI300, TRITON], ids=["mi300", "triton_kernels"])
def test_every_triton_kernel_shows_its_region_and_inductor_file(path: Path) -> None:
    events = _raw(path)
    files = {e["name"]: e["args"]["kernel_file"] for e in events
             if e.get("cat") == "cpu_op" and "kernel_file" in e.get("args", {})}
    device = {e["name"] for e in events if e.get("cat") == "kernel"
              and e["name"].startswith("triton_")}
    payload = build_compiled(load_trace(str(path), use_cache=False))
    [region] = payload["regions"]
    assert region["name"] == "Torch-Compiled Region: 0/0"
    shown = {k["name"]: k for k in region["inductor_kernels"]}
    assert set(shown) == device == set(files)
    for name, row in shown.items():
        assert row["file"] == files[name] and row["backend"] == "triton"
        assert row["hash"] == Path(files[name]).stem  # Inductor names the file by its hash
    # device time of the region: every kernel of the trace was launched inside it
    assert region["device_us"] == pytest.approx(
        sum(e["dur"] for e in events if e.get("cat") == "kernel"), abs=1e-3)
    [guard] = [e["dur"] for e in events if e.get("name") == "TorchDynamo Cache Lookup"]
    assert region["guard_us"] == pytest.approx(guard, abs=1e-3)


@needs_shared
def test_mi300_region_launches_and_extern_ops() -> None:
    events = _raw(MI300)
    [reg] = [e for e in events if e.get("name", "").startswith("Torch-Compiled Region")]
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]
                and reg["ts"] <= e["ts"] <= reg["ts"] + reg["dur"]]
    [region] = build_compiled(load_trace(str(MI300), use_cache=False))["regions"]
    assert region["launch_us"] == pytest.approx(sum(e["dur"] for e in launches), abs=1e-3)
    assert region["device_kernels"] == 12
    extern = {r["name"]: r for r in region["extern_ops"]}
    assert set(extern) == {"aten::mm", "aten::_scaled_dot_product_flash_attention"}
    assert extern["aten::mm"]["calls"] == 7


def test_fused_ops_from_kernel_names() -> None:
    assert fused_ops("triton_poi_fused_add_cos_sin_0") == "add_cos_sin"
    assert fused_ops("graph_0_cpp_fused_gelu_native_layer_norm_0") == "gelu_native_layer_norm"
    assert fused_ops("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1") == \
        "_unsafe_view_add_mean_mul_pow_rsqrt"
    assert fused_ops("aten::mm") == ""


def test_cpu_compile_sample_shows_regions_and_cpp_sources() -> None:
    [path] = sorted((SAMPLES / "compiled_cpu").glob("*.pt.trace.json.gz"))
    events = _raw(path)
    cpp = [e for e in events if e.get("cat") == "cpu_op" and "cpp_fused_" in e["name"]]
    payload = build_compiled(load_trace(str(path), use_cache=False))
    kernels = [k for r in payload["regions"] for k in r["inductor_kernels"]]
    assert sum(k["calls"] for k in kernels) == len(cpp) > 0
    names = {r["name"] for r in payload["regions"]}
    assert names == {"Torch-Compiled Region: 0/0", "CompiledFunctionBackward"}
    for k in kernels:
        assert k["backend"] == "cpp"
        assert "torchinductor_" in k["file"] and k["file"].endswith(".py") and k["line"] > 0
        # the wrapper frame the profiler recorded around this kernel names the same file
        assert any(e["name"].startswith(f"{k['file']}({k['line']})") for e in events
                   if e.get("cat") == "python_function")


def test_vendor_architecture_and_peaks() -> None:
    mi250 = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0,
             "warpSize": 64, "numSms": 104}
    assert device_vendor(mi250) == "AMD"
    assert architecture(mi250, "AMD") == "CDNA2 (gfx90a)"
    assert compute_capability(mi250, "AMD") is None  # never a CUDA compute capability
    assert match_peaks(mi250, "AMD") == "MI210"  # one MI250 GCD = an MI210
    mi300 = {"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "numSms": 304}
    assert (architecture(mi300, "AMD"), match_peaks(mi300, "AMD")) == ("CDNA3 (gfx942)",
                                                                       "MI300X")
    a100 = {"name": "NVIDIA A100-PG509-200", "computeMajor": 8, "computeMinor": 0,
            "warpSize": 32, "numSms": 108, "totalGlobalMem": 42297524224}
    assert (device_vendor(a100), architecture(a100, "NVIDIA"), compute_capability(
        a100, "NVIDIA"), match_peaks(a100, "NVIDIA")) == ("NVIDIA", "Ampere (sm_80)", "8.0",
                                                          "A100-40GB")
    h100 = {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
            "numSms": 132}
    assert (architecture(h100, "NVIDIA"), match_peaks(h100, "NVIDIA")) == ("Hopper (sm_90)",
                                                                           "H100-SXM")
    b200 = {"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0}
    assert (architecture(b200, "NVIDIA"), match_peaks(b200, "NVIDIA")) == (
        "Blackwell (sm_100)", "B200")
    assert match_peaks({"name": "NVIDIA GeForce GTX 1080"}, "NVIDIA") is None
    assert device_vendor({"warpSize": 64}) == "AMD"
    assert device_vendor({}, {"hip_runtime_version": 60000}) == "AMD"


@needs_shared
def test_amd_traces_overview_and_roofline() -> None:
    table = load_trace(str(MI250), use_cache=False)
    [gpu] = build_overview(table)["gpus"]
    assert (gpu["vendor"], gpu["architecture"], gpu["compute_capability"]) == (
        "AMD", "CDNA2 (gfx90a)", None)
    assert gpu["peaks_model"] == "MI210" and gpu["matrix_units"] == "matrix cores"
    assert build_kernel_pies(table)["matrix_units"] == "matrix cores"
    table = load_trace(str(MI300), use_cache=False)
    roof = build_roofline(table)
    assert roof["device"]["peaks_model"] == "MI300X"  # device 2 unlisted; every listed is one
    assert (roof["device"]["architecture"], roof["device"]["matrix_units"]) == (
        "CDNA3 (gfx942)", "matrix cores")
    [mm] = [r for r in roof["rows"] if r["name"] == "aten::mm"]
    # 4 calls of [32768,2048]x[2048,2048], 2 of x[2048,8192], 1 of [32768,8192]x[8192,2048]
    mm_flops = 2 * 32768 * 2048 * (4 * 2048 + 2 * 8192 + 8192)
    assert mm["flops"] == mm_flops
    assert mm["bound"] == "compute" and mm["peak_tflops"] == 1307.4
    assert mm["precision"] == "bf16"  # hipBLASLt Cijk_..._BBS_BH MFMA GEMM on bf16 data
    # MFU: mm + SDPA ([8,16,4096,128] q/k/v: 2*8*16*4096*4096*(128+128)) at the MI300X bf16
    # peak, over the one implicit step: first host event start to last device event end; the
    # Triton kernels carry no kernel_flop.
    events = _raw(MI300)
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation", "python_function",
                                                  "cuda_runtime")]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    step_s = (max(e["ts"] + e["dur"] for e in device) - min(e["ts"] for e in host)) * 1e-6
    sdpa_flops = 2 * 8 * 16 * 4096 * 4096 * (128 + 128)
    [gpu] = build_overview(table)["gpus"]
    assert gpu["mfu_pct"] == pytest.approx((mm_flops + sdpa_flops) / 1307.4e12 / step_s * 100)
    assert gpu["compute_capability"] is None and gpu["matrix_units"] == "matrix cores"


@needs_shared
def test_nvidia_trace_says_tensor_cores() -> None:
    table = load_trace(str(SHARED_TRACES / "tl_h100_qwen_mem_modules" /
                           "worker0.pt.trace.json.gz"), use_cache=False)
    [gpu] = build_overview(table)["gpus"]
    assert (gpu["architecture"], gpu["compute_capability"], gpu["matrix_units"]) == (
        "Hopper (sm_90)", "9.0", "tensor cores")
    assert build_kernel_pies(table)["matrix_units"] == "tensor cores"


@needs_shared
def test_compiled_fx_graph_calls_are_regions() -> None:
    """vLLM calls Inductor's graphs without a Dynamo frame: `## Call CompiledFxGraph <hash> ##`
    user annotations. Each becomes a region: its calls are the annotations, its Inductor
    kernels the `triton_*` ops (with kernel_file) inside them on the same thread."""
    events = _raw(VLLM_CAPTURE)
    calls = [e for e in events if e.get("cat") == "user_annotation"
             and e["name"].startswith("## Call CompiledFxGraph")]
    expected_calls: dict[str, int] = {}
    expected_kernels: dict[tuple[str, str], int] = {}
    for a in calls:
        expected_calls[a["name"]] = expected_calls.get(a["name"], 0) + 1
        for e in events:
            if (e.get("cat") == "cpu_op" and "kernel_file" in e.get("args", {})
                    and e["tid"] == a["tid"] and a["ts"] <= e["ts"]
                    and e["ts"] + e["dur"] <= a["ts"] + a["dur"]):
                key = (a["name"], e["name"])
                expected_kernels[key] = expected_kernels.get(key, 0) + 1
    assert len(expected_calls) == 3 and sum(expected_calls.values()) == 25
    payload = build_compiled(load_trace(str(VLLM_CAPTURE), use_cache=False))
    assert payload["available"]
    assert {r["name"]: r["calls"] for r in payload["regions"]} == expected_calls
    shown = {(r["name"], k["name"]): k["calls"] for r in payload["regions"]
             for k in r["inductor_kernels"]}
    assert shown == expected_kernels and payload["inductor_kernels"] == sum(
        expected_kernels.values())


@needs_shared
def test_fx_graph_inside_a_dynamo_region_is_counted_once() -> None:
    """tl_mi300: the `## Call CompiledFxGraph` annotation sits inside `Torch-Compiled Region:
    0/0`: one region, whose device time is every kernel's (checked above), not two."""
    events = _raw(MI300)
    assert any(e.get("name", "").startswith("## Call CompiledFxGraph") for e in events)
    names = [r["name"] for r in build_compiled(load_trace(str(MI300), use_cache=False))[
        "regions"]]
    assert names == ["Torch-Compiled Region: 0/0"]


@needs_shared
def test_mi250_matrix_core_share_is_above_zero() -> None:
    events = _raw(MI250)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    mfma = sum(e["dur"] for e in kernels if e["name"].startswith("Cijk_") and "_MI16x16x1_"
               in e["name"])
    share = build_kernel_pies(load_trace(str(MI250), use_cache=False))["tensor_cores"]["using"]
    assert share == pytest.approx(mfma / sum(e["dur"] for e in kernels)) and share > 0


def test_subtensorop_is_never_a_tensor_core_kernel(tmp_path) -> None:
    for name in ("MIOpenSubTensorOpWithScalar1d", "SubTensorOpWithSubTensor2d",
                 "SubTensorOpWithTransform4d"):
        assert not kernel_uses_tensor_cores(name)
    for name in ("Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN_ISA90a",
                 "void ck::kernel_gemm_xdl_cshuffle_v3<>()", "cutlass_80_tensorop_s1688gemm"):
        assert kernel_uses_tensor_cores(name)
    table = make_table([kernel(0, 30, name="MIOpenSubTensorOpWithScalar1d"),
                        kernel(40, 10, name="Cijk_Ailk_Bljk_HB_MT128x128x32_MI32x32x8_SN")],
                       tmp_path)
    assert build_kernel_pies(table)["tensor_cores"]["using"] == pytest.approx(10 / 40)


def test_hip_ext_module_launch_grid_is_in_work_items(tmp_path) -> None:
    """rocBLAS launches through hipExtModuleLaunchKernel with the grid in work-items: 350208
    work-items of 256 = 1368 blocks, the same launch as hipLaunchKernel's grid [1368,1,1]."""
    props = [{"id": 0, "name": "AMD Radeon Graphics", "numSms": 104, "warpSize": 64,
              "maxThreadsPerMultiprocessor": 2048, "computeMajor": 9, "computeMinor": 0}]
    events = [cpu_op("aten::mm", 0, 100, 1), cpu_op("aten::mm", 200, 100, 2),
              runtime(10, 5, 11, 1, name="hipExtModuleLaunchKernel", cat="cuda_runtime"),
              runtime(210, 5, 12, 2, name="hipLaunchKernel", cat="cuda_runtime"),
              kernel(20, 50, 11, 1, name="Cijk_A", grid=[350208, 1, 1], block=[256, 1, 1]),
              kernel(220, 50, 12, 2, name="Cijk_B", grid=[1368, 1, 1], block=[256, 1, 1])]
    rows = kernel_table(make_table(events, tmp_path, deviceProperties=props))
    by_name = dict(zip(rows["name"], rows["blocks_per_sm"]))
    assert by_name["Cijk_A"] == pytest.approx(1368 / 104)
    assert by_name["Cijk_B"] == pytest.approx(1368 / 104)
