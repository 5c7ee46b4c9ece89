"""Tensor-core detection: which kernels use tensor cores, which operators could (spec 3.9).

Kernel names are matched with one regex per distinct name (the `name` categorical's categories),
never per event. The reference's PyProf-era substring list is kept verbatim and extended with the
names that Volta..Hopper libraries use today.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable

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
    (r"tensorop", None, "CUTLASS tensor-op kernels: cutlass_80_tensorop_*, OpClassTensorOp, "
     "cutlass3x_sm90_tensorop_*"),
    (r"cutlass.*(?:gemm|conv)", r"simt", "other CUTLASS GEMM/conv kernels, except SIMT ones"),
    (r"xmma\w*(?:gemm|conv|fprop|dgrad|wgrad)", None, "cuDNN/cuBLAS xmma kernels: "
     "sm80_xmma_fprop_implicit_gemm_*, sm90_xmma_gemm_*"),
    (r"(?:tf32|bf16|fp16|f16|fp8|e4m3|e5m2)\w*gemm|gemm\w*(?:tf32|bf16|fp16|f16|fp8|e4m3)",
     r"sgemm|simt|gemv|maxwell|pascal|kepler", "reduced-precision GEMMs (not Maxwell/Pascal fp16 "
     "sgemm, which has no tensor cores)"),
    (r"nvjet", None, "cuBLAS 12.x Hopper/Blackwell nvjet GEMMs"),
    (r"flash_fwd|flash_bwd|flash_attn|fmha|native_sdpa", None, "flash / memory-efficient "
     "attention: FlashAttention, xformers fmha_cutlass*, cuDNN SDPA"),
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


def category_flags(names: pd.Series, predicate: Any,
                   rows: Optional[np.ndarray] = None) -> np.ndarray:
    """`predicate` over a categorical's categories, expanded to one bool per row (NaN -> False).
    With `rows`, only the categories those rows use are tested (the others read False)."""
    cat = names.cat if isinstance(names.dtype, pd.CategoricalDtype) else names.astype(
        "category").cat
    codes = cat.codes.to_numpy()
    categories = cat.categories
    used = np.arange(len(categories)) if rows is None else np.unique(codes[rows])
    used = used[used >= 0]
    flags = np.zeros(len(categories) + 1, dtype=bool)
    flags[used] = np.fromiter((predicate(str(categories[c])) for c in used), dtype=bool,
                              count=len(used))
    return flags[codes]


def event_tc_flags(table: TraceTable) -> np.ndarray:
    """Per event row: the name is a tensor-core kernel name (only meaningful for kernels)."""
    kernels = np.flatnonzero(table.events["kind"].to_numpy() == Kind.KERNEL)
    return table.memo("tc_kernel_flags", lambda: category_flags(
        table.events["name"], kernel_uses_tensor_cores, kernels))


def event_tc_eligible_flags(table: TraceTable) -> np.ndarray:
    """Per event row: the name is on the tensor-core-eligible operator list."""
    return table.memo("tc_op_flags",
                      lambda: category_flags(table.events["name"], is_tc_eligible_op))


def kernel_device_ids(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """GPU id of device events: `args.device`, else a numeric `pid`; NaN when neither exists."""
    args = table.device_args
    device = np.full(len(rows), np.nan)
    if len(args):
        lookup = pd.Series(args["device"].to_numpy(dtype=np.float64),
                           index=args["event"].to_numpy())
        lookup = lookup[~lookup.index.duplicated()]
        device = lookup.reindex(rows).to_numpy(dtype=np.float64)
    pids = table.events["pid"]
    pid_num = pd.to_numeric(pd.Series(pids.cat.categories.astype(str)), errors="coerce")
    pid_num = np.append(pid_num.to_numpy(dtype=np.float64), np.nan)
    fallback = pid_num[pids.cat.codes.to_numpy()[rows]]
    return np.where(np.isfinite(device), device, fallback)


def tensor_core_summary(table: TraceTable,
                        window: Optional[tuple[float, float]] = None) -> dict[str, Any]:
    """Tensor-core ratios for the overview and the kernel view.

    - kernel_tc_ratio: TC kernels' time / all kernels' time (every kernel event, as the kernel
      view's pie).
    - tc_eligible_ops_kernel_ratio: own-kernel time of the bottom-most TC-eligible nodes / own
      kernel time of all operators (spec 3.9; launches out of any op are not counted).
    - tc_ratio_by_device: per GPU id, TC kernel time / kernel time, each kernel clipped to
      `window` (the steps span) when given; empty when the trace has no kernels.
    """
    from .optree import build_op_tree  # local: optree imports this module

    rows = np.flatnonzero(table.events["kind"].to_numpy() == Kind.KERNEL)
    start = table.events["ts"].to_numpy()[rows]
    end = start + np.nan_to_num(table.events["dur"].to_numpy()[rows])
    tc = event_tc_flags(table)[rows]
    dur = end - start
    total = float(dur.sum())
    return {
        "kernel_tc_ratio": float(dur[tc].sum()) / total if total > 0 else 0.0,
        "tc_eligible_ops_kernel_ratio": build_op_tree(table).tc_eligible_ops_kernel_ratio(),
        "tc_ratio_by_device": _ratio_by_device(table, rows, start, end, tc, window),
    }


def _ratio_by_device(table: TraceTable, rows: np.ndarray, start: np.ndarray, end: np.ndarray,
                     tc: np.ndarray, window: Optional[tuple[float, float]]) -> dict[int, float]:
    if len(rows) == 0:
        return {}
    if window is not None:
        start, end = np.maximum(start, window[0]), np.minimum(end, window[1])
    dur = np.maximum(end - start, 0.0)
    device = kernel_device_ids(table, rows)
    known = np.isfinite(device)
    ids, inverse = np.unique(device[known].astype(np.int64), return_inverse=True)
    total = np.bincount(inverse, weights=dur[known], minlength=len(ids))
    tc_time = np.bincount(inverse, weights=np.where(tc[known], dur[known], 0.0),
                          minlength=len(ids))
    return {int(d): float(t / a) if a > 0 else 0.0 for d, t, a in zip(ids, tc_time, total)}
