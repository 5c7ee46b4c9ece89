"""Tensor-core detection: which kernels use tensor cores, which operators could (spec 3.9).

Kernel names are matched with one regex per distinct name (the `name` categorical's categories),
never per event. The reference's PyProf-era substring list is kept verbatim and extended with the
names that Volta..Blackwell libraries and AMD's ROCm libraries use today.

Vendors and generations covered (`MODERN_KERNEL_PATTERNS`, each with an example):
NVIDIA Volta/Turing/Ampere (HMMA/IMMA shape tags, CUTLASS tensorop, cuDNN xmma), Hopper
(`sm90_xmma_*`, `wgmma`/`gmma`, `cutlass3x_sm90_*`, cuBLAS `nvjet_*`), Blackwell (`sm100_*`/
`tcgen05`/UMMA, `cutlass3x_sm100_*`, nvjet); AMD MFMA (rocBLAS/Tensile and hipBLASLt
`Cijk_*_MI16x16x1_*` tags, Composable Kernel `*xdl*`/`xdlops`, `mfma`, RDNA3 `wmma`). MIOpen's
elementwise `SubTensorOp*` kernels contain "TensorOp" but run no matrix instruction: excluded.
"""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ...ingest.schema import Kind, TraceTable
from ..events import category_flags
from ..memo import memoised

#: The reference's substrings (PyProf's tc.py), matched case-sensitively as it does.
REFERENCE_KERNEL_PATTERNS: tuple[str, ...] = (
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
    "c1688",
)

#: Current libraries, matched case-insensitively: (pattern, unless this also matches, example).
MODERN_KERNEL_PATTERNS: tuple[tuple[str, Optional[str], str], ...] = (
    (r"(?<![a-z0-9])[hsicb](?:884|1688|1684|8816|16816|16832|16864)(?=[a-z])", None,
     "cuBLAS/cuDNN MMA shape tags: volta_h884gemm, turing_fp16_s1688gemm, ampere_bf16_s16816gemm,"
     " ampere_tf32_s1688gemm"),
    (r"[hiw]mma|gmma", None, "HMMA/IMMA/WMMA and Hopper warpgroup MMA (wgmma, hgmma)"),
    (r"(?<!sub)tensorop", None, "CUTLASS tensor-op kernels: cutlass_80_tensorop_*, "
     "OpClassTensorOp, cutlass3x_sm90_tensorop_* (never MIOpen's elementwise SubTensorOp*)"),
    (r"^Cijk_\w*_MI\d+x\d+x\d+", None, "AMD rocBLAS/Tensile and hipBLASLt MFMA GEMMs: "
     "Cijk_Alik_Bljk_SB_..._MI16x16x1_..."),
    (r"xdlops|_xdl_|gemm_xdl|xdl_cshuffle|mfma", None, "AMD Composable Kernel XDL (MFMA) "
     "kernels: DeviceGemmXdl*, kernel_gemm_xdl_cshuffle_v3, *_mfma_*"),
    (r"sm1[02]0_|tcgen05|(?<![a-z])umma", r"simt", "Blackwell tcgen05/UMMA kernels: "
     "sm100_xmma_*, cutlass3x_sm100_*"),
    (r"cutlass.*(?:gemm|conv(?!ert))", r"simt", "other CUTLASS GEMM/conv kernels, except SIMT "
     "ones (and never a dtype *Convert*)"),
    (r"xmma\w*(?:gemm|conv|fprop|dgrad|wgrad)", None, "cuDNN/cuBLAS xmma kernels: "
     "sm80_xmma_fprop_implicit_gemm_*, sm90_xmma_gemm_*"),
    (r"(?:tf32|bf16|fp16|f16|fp8|e4m3|e5m2)\w*gemm|gemm\w*(?:tf32|bf16|fp16|f16|fp8|e4m3)",
     r"sgemm|simt|gemv|maxwell|pascal|kepler", "reduced-precision GEMMs (not Maxwell/Pascal fp16 "
     "sgemm, which has no tensor cores)"),
    (r"nvjet", None, "cuBLAS 12.x Hopper/Blackwell nvjet GEMMs"),
    (r"flash_fwd|flash_bwd|flash_attn|FlashAttn(?:Fwd|Bwd)Sm\d+|fmha|native_sdpa|"
     r"^attn_(?:fwd|bwd)", r"combine|preprocess|postprocess|convert_d|dot_do_o|clear_dkv|"
     r"prepare_varlen", "flash / memory-efficient attention: FlashAttention 2 and 3 "
     "(flash::FlashAttnFwdSm90, FlashAttnBwdSm90), xformers fmha_cutlass*, cuDNN SDPA, "
     "AOTriton attn_fwd/attn_bwd (ROCm); never their split-KV combine, dO.O, dQ/dKV "
     "conversion and pre/post-processing kernels, which are elementwise or reductions"),
    (r"matmul_ogs|(?<![a-z])bmm_(?:mx)?(?:e\dm\d|bfloat16|fp16)|"
     r"(?:mxf?p?[468]|nvf?p?4|e2m1)\w*(?:gemm|matmul)|(?:gemm|matmul)\w*(?:mxf?p?[468]|nvf?p?4|"
     r"e2m1)", None, "block-scaled MX/NV FP8/FP6/FP4 GEMMs: TensorRT-LLM "
     "bmm_MxE4m3_MxE2m1MxE4m3_*, Triton matmul_ogs *_bf16xbf16xmxfp4, *mxfp4*gemm*"),
)

_REFERENCE_RE = re.compile("|".join(re.escape(p) for p in REFERENCE_KERNEL_PATTERNS))
_MODERN_RES = tuple((re.compile(p, re.IGNORECASE), re.compile(x, re.IGNORECASE) if x else None)
                    for p, x, _ in MODERN_KERNEL_PATTERNS)

#: Ops that can use tensor cores: the reference list (autocast fp16 ops plus backward names)...
REFERENCE_TC_OPS: frozenset[str] = frozenset((
    "aten::_convolution", "aten::_convolution_nogroup", "aten::conv1d", "aten::conv2d",
    "aten::conv3d", "aten::conv_tbc", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::convolution", "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose", "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr",
    "aten::matmul", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm",
    "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward",
))
#: ...plus PyTorch 2.x names: SDPA/attention kernels, scaled/int matmuls, `*Backward0` nodes.
MODERN_TC_OPS: frozenset[str] = frozenset((
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_flash_attention_forward",
    "aten::_flash_attention_backward", "aten::_efficient_attention_forward",
    "aten::_efficient_attention_backward", "aten::_scaled_mm", "aten::_int_mm",
    "aten::_addmm_activation", "aten::convolution_backward", "aten::cudnn_convolution_relu",
    "aten::cudnn_convolution_add_relu", "aten::einsum", "aten::bilinear", "aten::tensordot",
    "aten::_convolution_double_backward", "MmBackward0", "AddmmBackward0", "BmmBackward0",
    "BaddbmmBackward0", "AddbmmBackward0", "MvBackward0", "AddmvBackward0",
    "ConvolutionBackward0", "CudnnConvolutionBackward0", "LinearBackward0", "MatmulBackward0",
    "ScaledDotProductFlashAttentionBackward0", "ScaledDotProductEfficientAttentionBackward0",
    "ScaledDotProductCudnnAttentionBackward0",
))
TC_ELIGIBLE_OPS: frozenset[str] = REFERENCE_TC_OPS | MODERN_TC_OPS


def kernel_uses_tensor_cores(name: str) -> bool:
    """Whether a kernel name matches the reference list or a current library's TC naming."""
    if _REFERENCE_RE.search(name):
        return True
    return any(pattern.search(name) and not (unless and unless.search(name))
               for pattern, unless in _MODERN_RES)


def is_tc_eligible_op(name: str) -> bool:
    return name in TC_ELIGIBLE_OPS


def event_tc_flags(table: TraceTable) -> np.ndarray:
    """Per event row: the name is a tensor-core kernel name (only meaningful for kernels)."""
    kernels = np.flatnonzero(table.events["kind"].to_numpy() == Kind.KERNEL)
    return memoised(table, "tc_kernel_flags", lambda: category_flags(
        table.events["name"], kernel_uses_tensor_cores, kernels))


def event_tc_eligible_flags(table: TraceTable) -> np.ndarray:
    """Per event row: the name is on the tensor-core-eligible operator list."""
    return memoised(table, "tc_op_flags",
                      lambda: category_flags(table.events["name"], is_tc_eligible_op))
