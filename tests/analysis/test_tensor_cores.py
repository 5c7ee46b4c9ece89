"""Tensor cores (spec 3.9): kernel and operator lists, ratios."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.efficiency.tensor_cores import (
    REFERENCE_KERNEL_PATTERNS,
    REFERENCE_TC_OPS,
    is_tc_eligible_op,
    kernel_uses_tensor_cores,
)
from tb_plugin.analysis.events import category_flags
from tb_plugin.analysis.kernels import build_kernels
from tb_plugin.analysis.operators import build_operators
from tb_plugin.analysis.overview import tensor_core_summary
from tests.support import SHARED_TRACES, needs_shared

from .helpers import make_table
from .legacy_events import kernel, op, runtime

SHARED = str(SHARED_TRACES)
S884 = "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1"

USES_TC = [
    S884, "volta_h884gemm_64x64_ldg8_nn", "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
    "turing_int8_i8816gemm", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
    "ampere_tf32_s1688gemm_tf32_128x128_16x3_nn",
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16"
    "_kernel",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8",
    "void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<cutlass::arch::OpClassTensorOp>>",
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", "void wgmma_kernel<bf16>()",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>(Params)",
    "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<>()",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel::Params)",
    "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0",
    "void gemm_bf16_kernel<128>()",
    # FlashAttention-3 main kernels (Hopper warp-specialised, WGMMA)
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
    "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>, cutlass::bfloat16_t, float, "
    "cutlass::arch::Sm90, true>>>>(Params)",
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<>>>(Params)",
    # MX block-scaled FP8/FP4 GEMMs (TensorRT-LLM on Blackwell, Triton matmul_ogs)
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x8x512u2_s3_et128x8_m128x8x32_cga1x1x1_16dp256b_splitK2_TN"
    "_transOut_schedS_sm100f",
    "bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x512u2_s3_sm100f",
    "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1",
    "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
]
NO_TC = [
    "volta_sgemm_64x64_nt", "ampere_sgemm_128x64_nn", "maxwell_fp16_sgemm_fp16_128x64_nn",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
    "void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4, false, false>",
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false>", "triton_poi_fused_add_cos_sin_0",
    "volta_scudnn_128x64_relu_interior_nn_v1",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>()",
    # FlashAttention's elementwise/reduction helpers: split-KV combine, dO.O, dQ conversion,
    # pre/post-processing, varlen scheduling
    "void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<>, 7, 256, 1, false, "
    "true, cutlass::bfloat16_t, float, cutlass::arch::Sm90>>(Params)",
    "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>()",
    "void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 64, 128, 8>>(Params)",
    "void flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8>>(Params)",
    "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<>, float>>(Params)",
    "void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<>>(Params)",
    "void flash::prepare_varlen_num_blocks_kernel(int, int, int, int const*, int*)",
    # "flash" and "Fp8" in a KV-cache copy are not a GEMM
    "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*)",
]


@pytest.mark.parametrize("name", USES_TC)
def test_kernels_using_tensor_cores(name):
    assert kernel_uses_tensor_cores(name)


@pytest.mark.parametrize("name", NO_TC)
def test_kernels_not_using_tensor_cores(name):
    assert not kernel_uses_tensor_cores(name)


def test_reference_list_is_kept():
    for pattern in REFERENCE_KERNEL_PATTERNS:
        assert kernel_uses_tensor_cores(f"some_{pattern}_kernel")


def test_eligible_ops():
    assert all(is_tc_eligible_op(name) for name in REFERENCE_TC_OPS)
    for name in ("aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::addmm",
                 "aten::baddbmm", "aten::convolution", "aten::_scaled_dot_product_flash_attention",
                 "aten::_scaled_dot_product_efficient_attention", "MmBackward0"):
        assert is_tc_eligible_op(name), name
    assert not is_tc_eligible_op("aten::add") and not is_tc_eligible_op("aten::mm ")


def test_category_flags_only_tests_categories():
    names = pd.Series(pd.Categorical(["a", "b", None, "a", "c"]))
    calls = []

    def predicate(name):
        calls.append(name)
        return name != "b"

    np.testing.assert_array_equal(category_flags(names, predicate),
                                  [True, False, False, True, True])
    assert sorted(calls) == ["a", "b", "c"]
    calls.clear()
    np.testing.assert_array_equal(category_flags(names, predicate, np.array([1])),
                                  [False, False, False, False, False])
    assert calls == ["b"]


def tensor_core_table(tmp_path):
    events = [op("aten::conv2d", 200, 100, 3, tid="123"), op("op_no_tc", 205, 10, 4, tid="123"),
              op("aten::cudnn_convolution", 215, 10, 5, tid="123"),
              kernel(210, 10, 1000, 4, name="kernel_no_tc"), runtime(205, 5, 1000, 4, tid="123"),
              kernel(220, 15, 1001, 5, name=S884), runtime(215, 5, 1001, 5, tid="123")]
    return make_table(events, tmp_path)


def test_tensor_core(tmp_path):
    """test_tensor_core: eligibility, ratios, kernel flags and the two overall ratios."""
    table = tensor_core_table(tmp_path)
    rows = {r["name"]: r for r in build_operators(table)["rows"]}
    assert (rows["aten::conv2d"]["tc_eligible"], rows["aten::conv2d"]["tc_self_pct"],
            rows["aten::conv2d"]["tc_total_pct"]) == (True, 0, round(100 * 15 / 25, 2))
    assert (rows["op_no_tc"]["tc_eligible"], rows["op_no_tc"]["tc_self_pct"],
            rows["op_no_tc"]["tc_total_pct"]) == (False, 0, 0)
    assert (rows["aten::cudnn_convolution"]["tc_eligible"],
            rows["aten::cudnn_convolution"]["tc_self_pct"],
            rows["aten::cudnn_convolution"]["tc_total_pct"]) == (True, 100, 100)
    kernels = {r["name"]: r for r in build_kernels(table, "kernel_op_launch")["rows"]}
    assert (kernels["kernel_no_tc"]["operator"], kernels["kernel_no_tc"]["tensor_cores"],
            kernels["kernel_no_tc"]["op_tc_eligible"]) == ("op_no_tc", False, False)
    assert (kernels[S884]["operator"], kernels[S884]["tensor_cores"],
            kernels[S884]["op_tc_eligible"]) == ("aten::cudnn_convolution", True, True)
    summary = tensor_core_summary(table)
    assert summary["tc_ratio_by_device"][0] == pytest.approx(15 / 25)
    assert summary["tc_eligible_ops_kernel_ratio"] == pytest.approx(15 / 25)
    assert summary["kernel_tc_ratio"] == pytest.approx(15 / 25)


def test_tc_ratio_by_device_clips_to_window(tmp_path):
    table = tensor_core_table(tmp_path)
    summary = tensor_core_summary(table, window=(215.0, 230.0))
    assert summary["tc_ratio_by_device"] == {0: pytest.approx(10 / 15)}


def test_op_running_tc_kernels_becomes_eligible(tmp_path):
    """A non-listed op whose own launches ran TC kernels is eligible, and so are its parents."""
    events = [op("my::fused", 100, 50, 2, cat="cpu_op"), op("my::inner", 110, 20, 3, cat="cpu_op"),
              runtime(115, 2, 1, 3), kernel(200, 5, 1, 3, name="ampere_fp16_s16816gemm_nn"),
              op("ProfilerStep#1", 0, 400, 1)]
    rows = {r["name"]: r for r in build_operators(make_table(events, tmp_path))["rows"]}
    assert rows["my::inner"]["tc_eligible"] and rows["my::fused"]["tc_eligible"]
    assert rows["my::fused"]["tc_total_pct"] == 100


def test_no_kernels(tmp_path):
    summary = tensor_core_summary(make_table([op("aten::mm", 0, 5, 1)], tmp_path))
    assert summary == {"kernel_tc_ratio": 0.0, "tc_eligible_ops_kernel_ratio": 0.0,
                       "tc_ratio_by_device": {}}


@needs_shared
def test_resnet50_golden_tensor_cores():
    """Golden: no TC kernels (Tensor Cores 0.0 %), and "Kernels with 68% time are launched by
    Tensor Cores eligible operators"."""
    from tb_plugin.load import load_trace

    table = load_trace(f"{SHARED}/resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz",
                       use_cache=False)
    summary = tensor_core_summary(table)
    assert summary["kernel_tc_ratio"] == 0.0 and summary["tc_ratio_by_device"] == {0: 0.0}
    assert round(summary["tc_eligible_ops_kernel_ratio"] * 100) == 68


def test_fa3_share_counts_main_kernels_not_combine(tmp_path):
    """An FA3 forward (60 us) and its combine (10 us) plus a 30 us elementwise kernel: the
    tensor-core share is 60 / 100 (the old rules gave 10 / 100: combine in, main out)."""
    fa3 = USES_TC[-6]
    combine = NO_TC[-8]
    assert "FlashAttnFwdSm90" in fa3 and "Combine" in combine
    events = [kernel(0, 60, 1, 0, name=fa3), kernel(70, 10, 2, 0, name=combine),
              kernel(90, 30, 3, 0, name="elementwise")]
    table = make_table(events, tmp_path)
    assert tensor_core_summary(table)["kernel_tc_ratio"] == pytest.approx(60 / 100)
