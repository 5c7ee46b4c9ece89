"""Precision-aware peaks, the above-roof flag and MBU (issue 26, items 3-5), on hand-built
traces: every expected number is derived in the comments from the events and the datasheet
peaks, never from the code under test."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import numpy as np
import pytest

from tb_plugin.analysis.efficiency.hardware import PEAKS, match_peaks, peak_tflops
from tb_plugin.analysis.efficiency.precision import _overlaps, kernel_precision, op_precision
from tb_plugin.analysis.efficiency.roofline import _row as roofline_row
from tb_plugin.analysis.efficiency.roofline import build_roofline, mbu_pct
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, runtime, trace_files

pytestmark = pytest.mark.unit

A100 = [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "computeMajor": 8, "computeMinor": 0,
         "numSms": 108, "warpSize": 32, "totalGlobalMem": 42297524224}]
H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
         "numSms": 132, "warpSize": 32}]
B200 = [{"id": 0, "name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0, "numSms": 148,
         "warpSize": 32}]
MI300X = [{"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4,
           "numSms": 304, "warpSize": 64}]
F32, BF16 = ["float", "float"], ["c10::BFloat16", "c10::BFloat16"]
STEP_US = 10_000.0
SGEMM = "ampere_sgemm_128x64_nn"
TF32_GEMM = "ampere_tf32_s1688gemm_tf32_128x128_16x3_nn"
MX_FP8xFP4 = ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x8x512u2_s3_et128x8_m128x8x32_cga1x1x1_16dp256b"
              "_splitK2_TN_transOut_schedS_sm100f")
MX_FP4 = "bmm_Bfloat16_MxE2m1MxE2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x32_cga1x1x1_sm100f"


def _trace(tmp_path, ops, props, extra=()):
    """One step [0, 10000) us; op i (name, flops, types, kernel name, kernel us) runs at
    host time 100 + 1000 i and launches one kernel at 100 + 1000 i on stream 7."""
    events = [cpu_op("ProfilerStep#1", 0, STEP_US)]
    for i, (name, flops, types, kname, dur) in enumerate(ops):
        ts, ext = 100.0 + 1000.0 * i, i + 1
        args = {"Input Dims": [[64, 64], [64, 64]], "Input type": types}
        if flops is not None:
            args["flops"] = flops
        events += [cpu_op(name, ts, 50, ext, **args),
                   runtime(ts + 10, 5, corr=ext, ext=ext),
                   kernel(ts + 20, dur, corr=ext, ext=ext, name=kname)]
    return make_table(events + list(extra), tmp_path, deviceProperties=props)


def _row(payload, name):
    [row] = [r for r in payload["rows"] if r["name"] == name]
    return row


def test_tf32_gemm_is_scored_against_the_tf32_peak(tmp_path) -> None:
    """The issue's case: an fp32 GEMM at 30.7 TFLOP/s on an A100. As a TF32 tensor-core kernel
    its peak is 156 (A100 datasheet TF32 dense): MFU = 30.7 * 0.1 step share / 156."""
    flops = 30.7e12 * 1000e-6  # 1000 us at 30.7 TFLOP/s
    payload = build_roofline(_trace(tmp_path, [("aten::mm", flops, F32, TF32_GEMM, 1000.0)],
                                    A100))
    row = _row(payload, "aten::mm")
    assert (row["dtype"], row["precision"], row["peak_tflops"]) == ("fp32", "tf32", 156.0)
    assert row["achieved_tflops"] == pytest.approx(30.7) and row["above_roof"] is None
    [step] = payload["steps"]
    assert step["mfu_pct"] == pytest.approx(flops / 156e12 / (STEP_US * 1e-6) * 100)  # 1.97%


def test_plain_sgemm_above_the_fp32_peak_is_flagged_and_left_out_of_mfu(tmp_path) -> None:
    """The same rate from a SIMT sgemm: 30.7 > 1.05 * 19.5 (A100 fp32), under TF32's 156: the
    likely reason is the precision; the row is out of MFU (0: nothing else in the step)."""
    payload = build_roofline(_trace(tmp_path, [("aten::mm", 30.7e12 * 1e-3, F32, SGEMM,
                                                1000.0)], A100))
    row = _row(payload, "aten::mm")
    assert (row["precision"], row["peak_tflops"], row["above_roof"]) == ("fp32", 19.5,
                                                                         "precision")
    assert payload["steps"][0]["mfu_pct"] == 0.0


@pytest.mark.parametrize("ratio,flagged", [(1.0499, False), (1.0501, True)])
def test_above_roof_threshold_is_five_percent(tmp_path, ratio, flagged) -> None:
    """achieved = ratio * 19.5 TFLOP/s for 1000 us on an A100 sgemm: flagged only above 5%;
    an unflagged row counts in MFU: ratio * 19.5e12 * 1e-3 / 19.5e12 / 1e-2 = ratio * 10%."""
    flops = ratio * 19.5e12 * 1e-3
    payload = build_roofline(_trace(tmp_path, [("aten::mm", flops, F32, SGEMM, 1000.0)], A100))
    assert (_row(payload, "aten::mm")["above_roof"] is not None) == flagged
    assert payload["steps"][0]["mfu_pct"] == pytest.approx(0.0 if flagged else ratio * 10.0)


def test_above_roof_reasons(tmp_path) -> None:
    """Winograd conv above fp32 (25 > 20.475): algorithmic FLOPs, even though TF32 would fit;
    a direct one: precision.
    An sgemm at 700 TFLOP/s is above every A100 peak (int8 624 * 1.05 = 655.2): "overlap"
    when its kernel ran beside another op's kernel on another stream, else "unknown"."""
    wino = "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1"
    alone = build_roofline(_trace(tmp_path, [
        ("aten::conv2d", 25e12 * 1e-3, F32, wino, 1000.0),
        ("aten::mm", 700e12 * 1e-3, F32, SGEMM, 1000.0)], A100))
    assert _row(alone, "aten::conv2d")["above_roof"] == "algorithmic_flops"
    assert _row(alone, "aten::mm")["above_roof"] == "unknown"
    # the same conv on an implicit-GEMM kernel: no Winograd/FFT, so the faster precision
    direct = build_roofline(_trace(tmp_path, [
        ("aten::conv2d", 25e12 * 1e-3, F32, "implicit_convolve_sgemm", 1000.0)], A100))
    assert _row(direct, "aten::conv2d")["above_roof"] == "precision"
    # a third op's kernel on stream 8 runs [1200, 1300): inside the mm's kernel [1120, 2120)
    beside = [cpu_op("aten::relu", 3000, 50, 9), runtime(3010, 5, corr=9, ext=9),
              kernel(1200, 100, corr=9, ext=9, name="relu_kernel", stream=8)]
    shared = build_roofline(_trace(tmp_path, [
        ("aten::conv2d", 25e12 * 1e-3, F32, wino, 1000.0),
        ("aten::mm", 700e12 * 1e-3, F32, SGEMM, 1000.0)], A100, beside))
    assert _row(shared, "aten::mm")["above_roof"] == "overlap"
    assert _row(shared, "aten::conv2d")["above_roof"] == "algorithmic_flops"


@pytest.mark.parametrize("ratio,flagged", [(1.0499, False), (1.0501, True)])
def test_bandwidth_roof_and_mbu(tmp_path, ratio, flagged) -> None:
    """aten::add of two fp32 [64, 64] tensors: 4096 FLOPs, 3 * 4 * 4096 = 49152 bytes (two
    inputs + output, README table). In t us at ratio * 1.555 TB/s (A100-40GB): only the
    bandwidth roof can be exceeded ("bytes"); row MBU = ratio * 100; step MBU = 49152 /
    (1e-2 s * 1.555e12) * 100 when unflagged, 0 when flagged."""
    moved = 3 * 4 * 64 * 64
    dur = moved / (ratio * 1.555e12) * 1e6
    table = _trace(tmp_path, [("aten::add", None, F32, "vectorized_elementwise_kernel", dur)],
                   A100)
    row = _row(build_roofline(table), "aten::add")
    assert row["bytes"] == moved and row["flops"] == 64 * 64
    assert row["mbu_pct"] == pytest.approx(ratio * 100, rel=1e-6)
    assert row["above_roof"] == ("bytes" if flagged else None)
    assert row["bound"] == "memory"  # 1/12 FLOP/byte, far under the ridge 19.5/1.555
    step = build_roofline(table)["steps"][0]
    assert step["mbu_pct"] == pytest.approx(0.0 if flagged else moved / (1e-2 * 1.555e12) * 100)
    assert mbu_pct(table) == pytest.approx(step["mbu_pct"])


def test_mx_fp8_and_fp4_gemms_use_their_own_peaks(tmp_path) -> None:
    """On a B200 (HGX datasheet, dense = sparse / 2): an MX E2m1 x E4m3 GEMM runs in the f8f6f4
    mode, the FP8 rate 4500; an E2m1 x E2m1 one the FP4 rate 9000; both bf16-typed ops.
    MFU = (4e12 / 4500e12 + 8e12 / 9000e12) / 1e-2 s."""
    payload = build_roofline(_trace(tmp_path, [("aten::mm", 4e12, BF16, MX_FP8xFP4, 1000.0),
                                               ("aten::bmm", 8e12, BF16, MX_FP4, 1000.0)], B200))
    mm, bmm = _row(payload, "aten::mm"), _row(payload, "aten::bmm")
    assert (mm["dtype"], mm["precision"], mm["peak_tflops"]) == ("bf16", "fp8", 4500.0)
    assert (bmm["precision"], bmm["peak_tflops"]) == ("fp4", 9000.0)
    assert payload["steps"][0]["mfu_pct"] == pytest.approx(
        (4e12 / 4500e12 + 8e12 / 9000e12) / 1e-2 * 100)


def test_amd_fp32_on_matrix_cores_is_fp32_not_tf32(tmp_path) -> None:
    """MI300X: an fp32 GEMM on MFMA (Cijk_..._MI16x16x1) is scored at the MFMA fp32 peak 163.4;
    the same on an H100 cuBLAS tensor-op kernel with no format in its name is TF32 (494.7)."""
    cijk = "Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN_ISA942"
    amd = _row(build_roofline(_trace(tmp_path, [("aten::mm", 1e9, F32, cijk, 100.0)], MI300X)),
               "aten::mm")
    assert (amd["precision"], amd["peak_tflops"]) == ("fp32", 163.4)
    nv = _row(build_roofline(_trace(tmp_path, [
        ("aten::mm", 1e9, F32, "cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1", 100.0)],
        H100)), "aten::mm")
    assert (nv["precision"], nv["peak_tflops"]) == ("tf32", 494.7)


@pytest.mark.parametrize("name,precision", [
    (TF32_GEMM, "tf32"), (SGEMM, None), (MX_FP8xFP4, "fp8"), (MX_FP4, "fp4"),
    ("bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x512", "fp8"),  # output first: the inputs are fp8
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", "bf16"),  # mxfp4 weights upcast
    ("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x256x128", "fp8"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "bf16"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "tf32"),
    ("turing_int8_i8816gemm", "int8"), ("ampere_dgemm_64x32x16_nn", "fp64"),
    ("sm80_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize32x32x16", "fp64"),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
    ("Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN_ISA90a", None),  # tile shapes name no format
    # mixed inputs joined by "x": the wider input, whichever comes first, in any case
    ("_matmul_mxfp4xbf16_128x128", "bf16"), ("_matmul_MXFP4xBF16_128x128", "bf16"),
    ("gemm_e2m1xe4m3", "fp8"),
    ("gemm_fp4_fp16xbf16xfp8_1", "fp16"),  # equal widths: the first of them
    ("x_fp16xbf16_fp4xfp8", "fp16"),  # the first joined group naming two formats
    # mixed but not joined (or joined with one format only): the first format named
    ("gemm_fp8_fp16", "fp8"), ("gemm_fp4_bf16_128x128x64", "fp4"), ("gemm_fp4_bf16x128", "fp4"),
    ("HGEMM_FP16", "fp16"),
    # TensorRT-LLM: the A/B pair after the output, the wider of the two
    ("bmm_Fp16_E2m1E4m3_Fp32_t1", "fp8"), ("bmm_E4m3_Bfloat16Bfloat16_Fp32_t1", "bf16"),
    ("bmm_Fp32_AbCd_x", None),
])
def test_kernel_name_precision(name, precision) -> None:
    assert kernel_precision(name) == precision


def test_op_precision_rules() -> None:
    assert op_precision("fp32", None, True, "NVIDIA") == "tf32"
    assert op_precision("fp32", None, False, "NVIDIA") == "fp32"
    assert op_precision("fp32", None, True, "AMD") == "fp32"
    assert op_precision("fp64", None, True, "NVIDIA") == "fp64_matrix"
    assert op_precision("fp64", "fp64", True, "AMD") == "fp64_matrix"
    assert op_precision("fp64", None, False, "NVIDIA") == "fp64"
    assert op_precision("bf16", "fp8", True, "NVIDIA") == "fp8"
    assert op_precision(None, None, False, None) == "fp32"


def test_peaks_table_datasheet_values_and_fallback() -> None:
    """Dense datasheet numbers (sparse / 2 where the sheet prints sparse)."""
    assert PEAKS["B200"].tflops["fp4"] == 9000.0 and PEAKS["B200"].tflops["fp8"] == 4500.0
    assert PEAKS["GB200"].tflops["fp4"] == 10000.0 and PEAKS["GB200"].memory_tbps == 8.0
    assert PEAKS["MI355X"].tflops["fp4"] == 10066.3 and PEAKS["MI355X"].tflops["fp6"] == 10066.3
    assert PEAKS["MI300X"].tflops["fp8"] == 2614.9 and "fp4" not in PEAKS["MI300X"].tflops
    assert PEAKS["H100-SXM"].tflops["fp64_matrix"] == 67.0 and PEAKS["H100-SXM"].tflops[
        "fp64"] == 34.0
    # a chip without the format runs it in the next wider one it has
    assert peak_tflops("H100-SXM", "fp4") == 1978.9  # fp4 -> fp6 -> fp8
    assert peak_tflops("A100-40GB", "fp8") == 312.0  # fp8 -> fp16
    assert peak_tflops("MI355X", "tf32") == 157.3  # CDNA4 has no xf32: fp32
    assert peak_tflops("V100", "fp64_matrix") == 7.8
    assert peak_tflops("B200", "fp4") == 9000.0 and peak_tflops(None, "fp4") is None
    gb200 = {"name": "NVIDIA GB200", "computeMajor": 10, "computeMinor": 0}
    assert match_peaks(gb200, "NVIDIA") == "GB200"
    assert match_peaks({"name": "NVIDIA B200"}, "NVIDIA") == "B200"


def _roof(row, device) -> float:
    """The roof at the row's intensity, from the table (not from the row's peak field)."""
    peak = peak_tflops(device["peaks_model"], row["precision"])
    if row["intensity"] is None:
        return peak
    return min(peak, row["intensity"] * device["memory_tbps"])


@needs_shared
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_nothing_above_the_roof_without_its_flag(path) -> None:
    """Every real trace: a row is flagged iff it is more than 5% above its roof (or its
    bandwidth), and the steps' MFU counts exactly the unflagged rows' FLOPs."""
    payload = build_roofline(load_trace(str(path), use_cache=False))
    device = payload["device"]
    known = device is not None and device["peaks_model"] is not None  # else no roof, no flag
    for row in payload["rows"]:
        tf, tb = row["achieved_tflops"] or 0.0, row["achieved_tbps"] or 0.0
        over = known and (tf > 1.05 * _roof(row, device) or tb > 1.05 * device["memory_tbps"])
        assert (row["above_roof"] is not None) == over, row
    kept = sum(r["flops"] or 0.0 for r in payload["rows"] if r["above_roof"] is None)
    assert sum(s["flops"] for s in payload["steps"]) <= kept * (1 + 1e-9)


@needs_shared
def test_h100_qwen_rows_follow_their_kernels() -> None:
    """tl_h100_qwen: the bf16 linears ran sm90_xmma bf16 GEMMs (bf16, 989.4); the one fp32
    aten::matmul ran a CUTLASS SIMT sgemm (no tensor cores): vector fp32, 67."""
    path = SHARED_TRACES / "tl_h100_qwen_mem_modules" / "worker0.pt.trace.json.gz"
    with gzip.open(path, "rt") as f:
        kernels = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    assert any(n.startswith("sm90_xmma_gemm_bf16bf16") for n in kernels)
    assert any("cutlass_80_simt_sgemm" in n for n in kernels)
    payload = build_roofline(load_trace(str(path), use_cache=False))
    linear = [r for r in payload["rows"] if r["name"] == "aten::linear"]
    assert {(r["precision"], r["peak_tflops"]) for r in linear} == {("bf16", 989.4)}
    [matmul] = [r for r in payload["rows"] if r["name"] == "aten::matmul"]
    assert (matmul["dtype"], matmul["precision"], matmul["peak_tflops"]) == ("fp32", "fp32",
                                                                             67.0)


def _op_row(flops: float, bytes_: float) -> SimpleNamespace:
    """One roofline row as `roofline._row` reads it: 1 s of an fp16 matmul."""
    return SimpleNamespace(name="aten::mm", dtype="c10::Half", precision="fp16", calls=1,
                           flops=flops, bytes=bytes_, time_us=1e6, estimate=False, reason=None,
                           algorithmic=False, overlap=False)


def test_bound_is_compute_from_the_ridge_point_on() -> None:
    """`bound` = "compute" when FLOPs / bytes is at or above the ridge point (peak TFLOP/s of
    the row's precision / peak TB/s: FLOPs per byte), "memory" just below it."""
    key = "A100-80GB"
    peak, bandwidth = PEAKS[key].tflops["fp16"], PEAKS[key].memory_tbps
    ridge = 312.0 / 2.039  # the A100 80GB datasheet: 312 dense fp16 TFLOP/s, 2.039 TB/s
    assert (peak, bandwidth) == (312.0, 2.039)
    info = {"memory_tbps": bandwidth}
    at = roofline_row(_op_row(ridge, 1.0), key, info)
    assert at["intensity"] == ridge and at["bound"] == "compute"
    below = roofline_row(_op_row(float(np.nextafter(ridge, 0.0)), 1.0), key, info)
    assert below["bound"] == "memory"
    # units: 2e12 FLOPs and 1e12 bytes in 1 s are 2 TFLOP/s and 1 TB/s, MBU = 1 / 2.039
    unit = roofline_row(_op_row(2e12, 1e12), key, info)
    assert unit["achieved_tflops"] == 2.0 and unit["achieved_tbps"] == 1.0
    assert unit["mbu_pct"] == pytest.approx(100.0 / 2.039, rel=1e-12)


def _hits(*kernels):
    start, end, owner = (np.array([k[i] for k in kernels], dtype=float) for i in range(3))
    return _overlaps(start, end, owner).tolist()


def test_overlaps_mark_kernels_running_while_another_groups_runs() -> None:
    """Each kernel is compared with the one of the longest reach among those that started
    before it; both are marked when they overlap for a positive time and differ in owner."""
    assert _hits((0, 10, 1), (5, 15, 2)) == [True, True]
    assert _hits((0, 10, 1), (10, 20, 2)) == [False, False]  # touching is not overlapping
    assert _hits((0, 10, 1), (5, 15, 1)) == [False, False]  # the same group
    # C [5, 6) is compared with B (the longest reach), not with A (which it overlaps too)
    assert _hits((0, 10, 1), (1, 20, 1), (5, 6, 2)) == [False, True, True]
    # the result follows the input order, not the start order
    assert _hits((5, 15, 2), (30, 31, 3), (0, 10, 1)) == [True, False, True]
    assert _hits((0, 10, 1)) == [False]
    assert _hits() == []
