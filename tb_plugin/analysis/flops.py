"""FLOPs and bytes moved per operator call, from the `flops` argument or from shapes and dtypes.

A multiply-add counts as 2 FLOPs (the convention of `torch.utils.flop_counter` and of
`with_flops=True`); bias adds are not counted. Formulas, with M, K, N, B the matrix sizes and
`es` the element size of the first tensor's dtype:

- mm [M,K]x[K,N], addmm (bias first), _addmm_activation: 2*M*K*N
- bmm [B,M,K]x[B,K,N], baddbmm: 2*B*M*K*N; matmul: 2*batch*M*K*N (batch broadcast, 1-D
  operands as vectors); linear x[...,K] W[N,K]: 2*prod(x[:-1])*K*N
- convolutions (conv1d/2d/3d, convolution, _convolution, cudnn/mkldnn/miopen_convolution,
  conv_transpose*): 2 * N * prod(out spatial) * Cout * Cin/groups * prod(kernel), the output size
  from stride/padding/dilation in `Concrete Inputs` (for transposed convolutions the input's
  spatial size replaces the output's, as torch's counter does); convolution_backward: 2x the
  forward of its grad_output's shape
- attention (scaled_dot_product_attention and its flash/efficient/cudnn/cpu variants,
  _flash_attention_forward, _efficient_attention_forward): 2*B*H*Lq*Lk*(D + Dv), causal masks
  not discounted; their backward: 2x that
- elementwise ops (add, mul, gelu, copy_...): FLOPs = elements of the largest input, bytes =
  all inputs + one output the size of the largest input; reductions and normalisations (sum,
  mean, softmax, layer_norm...): FLOPs = input elements, bytes = inputs + the output
- Inductor kernels (`kernel_file` set): Inductor's own `kernel_flop`/`kernel_num_gb` when it
  wrote them, else bytes = all tensor arguments (outputs are arguments), FLOPs unknown

Bytes for matrix ops and convolutions are inputs + output, each read or written once. Every
row that did not come from a recorded `flops`/`kernel_flop` is an estimate (`estimate` True).
Parsing runs once per distinct (name, shapes, types, scalars), never per event.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from .memo import memoised

_SIZES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "half": 2,
          "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
          "c10::Float8_e5m2fnuz": 1, "int": 4, "long int": 8, "long": 8, "short int": 2,
          "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
          "c10::complex<double>": 16}
_DTYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "half": "fp16",
           "c10::BFloat16": "bf16", "signed char": "int8", "unsigned char": "int8"}

MM_OPS = frozenset(("mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "matmul", "linear"))
CONV_OPS = frozenset(("conv1d", "conv2d", "conv3d", "convolution", "_convolution",
                      "cudnn_convolution", "mkldnn_convolution", "miopen_convolution",
                      "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"))
ATTENTION_OPS = frozenset(("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                           "_scaled_dot_product_efficient_attention",
                           "_scaled_dot_product_cudnn_attention",
                           "_scaled_dot_product_flash_attention_for_cpu",
                           "_flash_attention_forward", "_efficient_attention_forward"))
ATTENTION_BACKWARD_OPS = frozenset(f"{op}_backward" for op in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")) | {
    "_flash_attention_backward", "_efficient_attention_backward"}
_BLHD_OPS = frozenset(("_flash_attention_forward", "_efficient_attention_forward",
                       "_flash_attention_backward", "_efficient_attention_backward"))
ELEMENTWISE_OPS = frozenset((
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "relu",
    "gelu", "silu", "sigmoid", "tanh", "clamp", "where", "copy", "fill", "masked_fill",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
    "tanh_backward", "native_dropout", "dropout", "hardtanh", "leaky_relu", "_to_copy", "addcmul",
    "addcdiv", "lerp", "reciprocal", "sin", "cos", "maximum", "minimum", "erf", "sign"))
REDUCTION_OPS = frozenset((
    "sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std",
    "prod", "softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm",
    "native_layer_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
    "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm", "cumsum", "argmax"))


def op_kind(name: str) -> Optional[str]:
    """"mm", "conv", "attention", "attention_backward", "conv_backward", "elementwise",
    "reduction", or None, for an `aten::` operator name."""
    if not name.startswith("aten::"):
        return None
    base = name[6:]
    bare = base[:-1] if base.endswith("_") and not base.startswith("_") else base
    if base in MM_OPS:
        return "mm"
    if base in CONV_OPS:
        return "conv"
    if base == "convolution_backward":
        return "conv_backward"
    if base in ATTENTION_OPS:
        return "attention"
    if base in ATTENTION_BACKWARD_OPS:
        return "attention_backward"
    if bare in ELEMENTWISE_OPS or base in ELEMENTWISE_OPS:
        return "elementwise"
    if base in REDUCTION_OPS:
        return "reduction"
    return None


def _literal(text: Any) -> list:
    if not isinstance(text, str) or not text:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return value if isinstance(value, list) else []


def _shape(value: Any) -> Optional[list[int]]:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value
    return None


def _ints(value: Any, count: int, default: int) -> list[int]:
    """"[2, 2]" / "2" / "" -> a list of `count` ints."""
    parsed = value
    if isinstance(value, str):
        try:
            parsed = ast.literal_eval(value) if value.strip() else None
        except (ValueError, SyntaxError):
            parsed = None
    if isinstance(parsed, int):
        return [parsed] * count
    if isinstance(parsed, list) and parsed and all(isinstance(v, int) for v in parsed):
        return (parsed * count)[:count] if len(parsed) == 1 else parsed[:count]
    return [default] * count


def matmul_flops(kind: str, name: str, shapes: list[Optional[list[int]]]) -> Optional[float]:
    """2*M*K*N (times batch) for the mm family; None when the shapes do not fit."""
    base = name[6:]
    tensors = [s for s in shapes if s is not None]
    if base in ("addmm", "_addmm_activation", "baddbmm"):
        tensors = [s for s in shapes[1:3] if s is not None]
    if base == "linear":
        if len(tensors) < 2 or len(tensors[1]) != 2:
            return None
        x, w = tensors[0], tensors[1]
        return 2.0 * math.prod(x[:-1]) * x[-1] * w[0]
    if len(tensors) < 2:
        return None
    a, b = tensors[0], tensors[1]
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    if a[-1] != b[-2]:
        return None
    batch = math.prod(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
    return 2.0 * batch * a[-2] * a[-1] * b[-1]


def conv_flops(name: str, shapes: list[Optional[list[int]]], scalars: list[Any]
               ) -> Optional[tuple[float, list[int]]]:
    """(FLOPs, output shape) of a convolution call; None when the shapes do not fit."""
    base = name[6:]
    if len(shapes) < 2 or shapes[0] is None or shapes[1] is None:
        return None
    x, w = shapes[0], shapes[1]
    dims = len(x) - 2
    if dims < 1 or len(w) != len(x):
        return None
    arg = (scalars + [""] * 12)
    transposed = base.startswith("conv_transpose")
    if base in ("convolution", "_convolution"):
        transposed = str(arg[6]).strip() == "True"
    stride, padding = _ints(arg[3], dims, 1), _ints(arg[4], dims, 0)
    dilation_at = 7 if base.startswith("conv_transpose") else 5
    dilation = _ints(arg[dilation_at], dims, 1)
    kernel = w[2:]
    if transposed:
        out_padding = _ints(arg[7] if base in ("convolution", "_convolution") else arg[5],
                            dims, 0)
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                   zip(x[2:], stride, padding, dilation, kernel, out_padding)]
        out = [x[0], w[1], *spatial]
        flops = 2.0 * x[0] * math.prod(x[2:]) * w[0] * w[1] * math.prod(kernel)
        return flops, out
    spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
               zip(x[2:], stride, padding, dilation, kernel)]
    if any(v <= 0 for v in spatial):
        return None
    out = [x[0], w[0], *spatial]
    return 2.0 * x[0] * math.prod(spatial) * w[0] * w[1] * math.prod(kernel), out


def attention_flops(name: str, shapes: list[Optional[list[int]]]) -> Optional[float]:
    """2*B*H*Lq*Lk*(D + Dv) for q, k, v; [B, L, H, D] for _flash/_efficient_attention_*."""
    q, k, v = (shapes + [None] * 3)[:3]
    if q is None or k is None or v is None or not len(q) == len(k) == len(v) == 4:
        return None
    if name[6:] in _BLHD_OPS:
        (b, lq, h, d), lk, dv = q, k[1], v[3]
    else:
        (b, h, lq, d), lk, dv = q, k[2], v[3]
    return 2.0 * b * h * lq * lk * (d + dv)


def estimate(name: str, dims: Any, types: Any, scalars: Any
             ) -> tuple[float, float, Optional[str]]:
    """(FLOPs, bytes, dtype) of one call from its recorded shapes; NaN where unknown."""
    kind = op_kind(name)
    shapes = [_shape(s) for s in _literal(dims)]
    type_list = [str(t) for t in _literal(types)]
    sizes = [_SIZES.get(t, 0) for t in type_list] + [0] * len(shapes)
    dtype = next((_DTYPES[t] for t in type_list if t in _DTYPES), None)
    elems = [math.prod(s) if s is not None else 0 for s in shapes]
    es = next((sizes[i] for i, s in enumerate(shapes) if s is not None and sizes[i]), 0)
    moved = float(sum(n * sizes[i] for i, n in enumerate(elems)))
    flops = bytes_ = math.nan
    if kind == "mm":
        flops = matmul_flops(kind, name, shapes) or math.nan
        out = _mm_output(name, shapes)
        bytes_ = moved + out * es if out is not None else math.nan
    elif kind in ("conv", "conv_backward"):
        shape_args = shapes if kind == "conv" else [shapes[1] if len(shapes) > 1 else None,
                                                    shapes[2] if len(shapes) > 2 else None]
        result = conv_flops("aten::convolution" if kind == "conv_backward" else name,
                            shape_args, _literal(scalars) if kind == "conv" else [])
        if kind == "conv_backward" and len(shapes) > 2 and None not in shapes[:3]:
            grad, w = shapes[0], shapes[2]
            flops = 4.0 * math.prod(grad) * math.prod(w[1:])
            bytes_ = moved + (elems[1] + elems[2]) * es
        elif result is not None:
            flops, out = result
            bytes_ = moved + math.prod(out) * es
    elif kind in ("attention", "attention_backward"):
        forward = attention_flops(name, shapes[1:4] if kind == "attention_backward" else shapes)
        if forward is not None:
            flops = forward * (2.0 if kind == "attention_backward" else 1.0)
            bytes_ = moved + (elems[0] * es if shapes and shapes[0] else 0.0)
    elif kind == "elementwise" and elems and max(elems) > 0:
        flops = float(max(elems))
        bytes_ = moved + max(elems) * es
    elif kind == "reduction" and elems and elems[0] > 0:
        flops = float(elems[0])
        bytes_ = moved + (elems[0] * es if "norm" in name or "softmax" in name else 0.0)
    return flops, bytes_, dtype


def _mm_output(name: str, shapes: list[Optional[list[int]]]) -> Optional[float]:
    base = name[6:]
    tensors = shapes[1:3] if base in ("addmm", "_addmm_activation", "baddbmm") else shapes[:2]
    if len(tensors) < 2 or tensors[0] is None or tensors[1] is None:
        return None
    a, b = tensors
    if base == "linear":
        return float(math.prod(a[:-1]) * b[0])
    batch = math.prod(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))) if len(a) > 1 and \
        len(b) > 1 else 1
    rows = a[-2] if len(a) > 1 else 1
    cols = b[-1] if len(b) > 1 else 1
    return float(batch * rows * cols)


def op_flops(table: TraceTable) -> pd.DataFrame:
    """One row per op_args row: event, flops, bytes, dtype, estimate (computed once).

    `flops` is the recorded `flops` (or Inductor's `kernel_flop`) when present, else the shape
    estimate; `bytes` Inductor's `kernel_num_gb` * 1e9 when present, else the estimate; NaN
    where neither is known.
    """
    return memoised(table, "op_flops", lambda: _op_flops(table))


def _op_flops(table: TraceTable) -> pd.DataFrame:
    args = table.op_args
    events = args["event"].to_numpy()
    names = table.events["name"].array[events] if len(events) else pd.Categorical([])
    keys = pd.DataFrame({
        "name": pd.Categorical(names).codes,
        "dims": args["input_dims"].cat.codes.to_numpy(),
        "types": args["input_types"].cat.codes.to_numpy(),
        "scalars": args["concrete_inputs"].cat.codes.to_numpy(),
    })
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(keys)) if len(keys) else (
        np.empty(0, dtype=np.int64), [])
    name_cats = pd.Categorical(names).categories
    cats = {c: args[c].cat.categories for c in ("input_dims", "input_types", "concrete_inputs")}
    flops = np.full(len(uniques), np.nan)
    bytes_ = np.full(len(uniques), np.nan)
    dtypes = np.empty(len(uniques), dtype=object)

    def pick(column: str, code: int) -> Any:
        return cats[column][code] if code >= 0 else None

    for i, (n, d, t, s) in enumerate(uniques):
        name = str(name_cats[n]) if n >= 0 else ""
        flops[i], bytes_[i], dtypes[i] = estimate(
            name, pick("input_dims", d), pick("input_types", t), pick("concrete_inputs", s))
    if name_cats is not None and len(uniques) == 0:
        codes = np.empty(0, dtype=np.int64)
    out_flops = flops[codes] if len(codes) else np.empty(0)
    out_bytes = bytes_[codes] if len(codes) else np.empty(0)
    recorded = args["flops"].to_numpy(dtype=np.float64)
    inductor = args["kernel_flop"].to_numpy(dtype=np.float64)
    measured = np.where(np.isfinite(recorded), recorded, inductor)
    has_measure = np.isfinite(measured)
    gb = args["kernel_num_gb"].to_numpy(dtype=np.float64)
    kernel = args["kernel_file"].notna().to_numpy()
    sizes = _argument_bytes(args) if kernel.any() else np.zeros(len(args))
    out_bytes = np.where(np.isfinite(gb), gb * 1e9, np.where(kernel, sizes, out_bytes))
    return pd.DataFrame({
        "event": events,
        "flops": np.where(has_measure, measured, out_flops),
        "bytes": out_bytes,
        "dtype": dtypes[codes] if len(codes) else np.empty(0, dtype=object),
        "estimate": ~has_measure,
    })


def _argument_bytes(args: pd.DataFrame) -> np.ndarray:
    """Bytes of all tensor arguments of each row (Inductor kernels: inputs and outputs)."""
    keys = pd.MultiIndex.from_arrays([args["input_dims"].cat.codes.to_numpy(),
                                      args["input_types"].cat.codes.to_numpy()])
    codes, uniques = pd.factorize(keys)
    dims_cats, type_cats = args["input_dims"].cat.categories, args["input_types"].cat.categories
    values = np.zeros(len(uniques))
    for i, (d, t) in enumerate(uniques):
        shapes = [_shape(s) for s in _literal(dims_cats[d] if d >= 0 else None)]
        sizes = [_SIZES.get(str(x), 0) for x in _literal(type_cats[t] if t >= 0 else None)]
        values[i] = float(sum(math.prod(s) * sizes[j] for j, s in enumerate(shapes)
                              if s is not None and j < len(sizes)))
    return values[codes]
