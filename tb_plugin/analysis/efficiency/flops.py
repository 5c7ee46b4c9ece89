"""FLOPs and bytes moved per operator call, from the `flops` argument or from shapes and dtypes.

A multiply-add counts as 2 FLOPs (the convention of `torch.utils.flop_counter` and of
`with_flops=True`); bias adds are not counted. GEMMs (mm, addmm, bmm, baddbmm, addbmm, matmul,
linear, _addmm_activation, _scaled_mm, _int_mm), convolutions (every forward and backward
variant of CUDA, ROCm and CPU: `op_schemas.LAYOUTS`) and attention (SDPA and its
flash/efficient/cudnn/cpu kernels, forward and backward) follow `flop_formulas`, which reads
each argument by its name in the op's schema. Their FLOPs are a number or NaN with a `reason`
(invalid geometry, a geometry or shape the trace did not record), never an exception. A
PyTorch 1.x conv backward records no output_mask: the `*_backward_input/_weight` calls under
it say which gradients it computed.

- elementwise ops (add, mul, gelu, copy_...): FLOPs = elements of the largest input, bytes =
  all inputs + one output the size of the largest input; reductions and normalisations (sum,
  mean, softmax, layer_norm...): FLOPs = input elements, bytes = inputs + the output
- Inductor kernels (`kernel_file` set): Inductor's own `kernel_flop`/`kernel_num_gb` when it
  wrote them, else bytes = all tensor arguments (outputs are arguments), FLOPs unknown

Bytes for matrix ops and convolutions are inputs + output, each read or written once (conv
backward: + the gradients it writes; attention backward: + dq, dk, dv). Every row that did not
come from a recorded `flops`/`kernel_flop` is an estimate (`estimate` True). Parsing runs once
per distinct (name, shapes, types, scalars), never per event.
"""

from __future__ import annotations

import ast
import math
from typing import Any, NamedTuple, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..dtypes import ELEMENT_BYTES
from ..memo import memoised
from .flop_formulas import (
    NO_ARG,
    Arg,
    NotRecorded,
    Unknown,
    attention,
    bind,
    conv_backward_each,
    conv_forward,
    conv_gradients,
    conv_per_output,
    gemm,
)
from .flop_links import MASK_NOT_RECORDED, resolve_pending
from .op_schemas import LAYOUTS

_SIZES = ELEMENT_BYTES
_DTYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "half": "fp16",
           "c10::BFloat16": "bf16", "signed char": "int8", "unsigned char": "int8"}

MM_OPS = frozenset(("mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "matmul",
                    "linear", "_scaled_mm", "_int_mm"))
CONV_OPS = frozenset(op for op in LAYOUTS if "conv" in op and "backward" not in op)
CONV_BACKWARD_OPS = frozenset(op for op in LAYOUTS if "conv" in op and "backward" in op)
ATTENTION_OPS = frozenset(("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                           "_scaled_dot_product_efficient_attention",
                           "_scaled_dot_product_cudnn_attention",
                           "_scaled_dot_product_flash_attention_for_cpu",
                           "_flash_attention_forward", "_efficient_attention_forward"))
ATTENTION_BACKWARD_OPS = frozenset(f"{op}_backward" for op in (
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")) | {
    "_flash_attention_backward", "_efficient_attention_backward"}
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
    if base in CONV_BACKWARD_OPS:
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


class Estimate(NamedTuple):
    flops: float
    bytes: float
    dtype: Optional[str]
    reason: Optional[str]  # why a GEMM/convolution/attention call's FLOPs are unknown
    #: what another event of the trace can still tell (`flop_links`): ("mask", FLOPs of one
    #: gradient) for a conv backward without output_mask; ("output", FLOPs per output element,
    #: rank, batch, channels, bytes read, element size) for a conv without its geometry
    pending: Optional[tuple] = None


_NAN = math.nan


def estimate(name: str, dims: Any, types: Any, scalars: Any) -> Estimate:
    """FLOPs, bytes, dtype of one call from its recorded arguments; NaN where unknown, with
    the reason for a FLOP-carrying op. Never raises on a trace's input."""
    kind = op_kind(name)
    dim_list = _literal(dims)
    shapes = [_shape(s) for s in dim_list]
    type_list = [str(t) for t in _literal(types)]
    sizes = [_SIZES.get(t, 0) for t in type_list] + [0] * len(shapes)
    dtype = next((_DTYPES[t] for t in type_list if t in _DTYPES), None)
    elems = [math.prod(s) if s is not None else 0 for s in shapes]
    es = next((sizes[i] for i, s in enumerate(shapes) if s is not None and sizes[i]), 0)
    moved = float(sum(n * sizes[i] for i, n in enumerate(elems)))
    if kind == "elementwise" and elems and max(elems) > 0:
        return Estimate(float(max(elems)), moved + max(elems) * es, dtype, None)
    if kind == "reduction" and elems and elems[0] > 0:
        out = elems[0] * es if "norm" in name or "softmax" in name else 0.0
        return Estimate(float(elems[0]), moved + out, dtype, None)
    if kind not in ("mm", "conv", "conv_backward", "attention", "attention_backward"):
        return Estimate(_NAN, _NAN, dtype, None)
    if not dim_list:
        return Estimate(_NAN, _NAN, dtype, "no shapes recorded (record_shapes=False)")
    concrete = _literal(scalars) if isinstance(scalars, str) and scalars.strip() else None
    args: dict[str, Arg] = {}
    try:
        args = bind(name[6:], dim_list, type_list, concrete)
        return _heavy(kind, name[6:], args, moved, es, dtype)
    except NotRecorded as exc:
        return Estimate(_NAN, _NAN, dtype, str(exc), _sized_later(kind, name[6:], args, moved, es))
    except Unknown as exc:
        return Estimate(_NAN, _NAN, dtype, str(exc))


def _sized_later(kind: str, base: str, args: dict[str, Arg], moved: float, es: int
                 ) -> Optional[tuple]:
    if kind != "conv":
        return None
    try:
        return ("output", *conv_per_output(base, args), moved, es)
    except Unknown:
        return None


def _heavy(kind: str, base: str, args: dict[str, Arg], moved: float, es: int,
           dtype: Optional[str]) -> Estimate:
    if kind == "mm":
        flops, out = gemm(base, args)
        return Estimate(flops, moved + math.prod(out) * es, dtype, None)
    if kind == "conv":
        flops, shape = conv_forward(base, args)
        written = moved + math.prod(shape) * es if shape is not None else _NAN
        return Estimate(flops, written, dtype, None)
    if kind == "conv_backward":
        each = conv_backward_each(base, args)
        count = conv_gradients(base, args)
        written = moved + _gradient_elems(base, args) * es
        if count is None:
            return Estimate(_NAN, written, dtype, MASK_NOT_RECORDED, ("mask", each))
        return Estimate(each * count, written, dtype, None)
    flops = attention(base, args, kind == "attention_backward")
    query = args["query"].shape or []
    written = math.prod(query) * es * (3 if kind == "attention_backward" else 1)
    return Estimate(flops, moved + written, dtype, None)


def _gradient_elems(base: str, args: dict[str, Arg]) -> float:
    """Elements of the gradients a conv backward writes (grad_input, grad_weight), from the
    input/weight shapes it read; 0 for the ones it does not say."""
    total = 0.0
    if not base.endswith(("_backward_weight", "_backward_weights")):
        shape = args.get("self", args.get("input", NO_ARG)).shape
        total += math.prod(shape) if shape else 0.0
    if not base.endswith("_backward_input"):
        shape = args.get("weight", NO_ARG).shape
        total += math.prod(shape) if shape else 0.0
    return total


def op_flops(table: TraceTable) -> pd.DataFrame:
    """One row per op_args row: event, flops, bytes, dtype, estimate, reason (computed once).

    `flops` is the recorded `flops` (or Inductor's `kernel_flop`) when present, else the shape
    estimate; `bytes` Inductor's `kernel_num_gb` * 1e9 when present, else the estimate; NaN
    where neither is known. `reason` says why a GEMM/convolution/attention call's FLOPs are
    unknown (None otherwise). An estimator failure costs its rows only: any exception of one
    signature becomes that signature's reason.
    """
    return memoised(table, "op_flops", lambda: _op_flops(table))


def _safe_estimate(name: str, dims: Any, types: Any, scalars: Any) -> Estimate:
    try:
        return estimate(name, dims, types, scalars)
    except Exception as exc:  # noqa: BLE001 (the boundary: one signature, never the view)
        return Estimate(_NAN, _NAN, None, f"estimator error: {type(exc).__name__}: {exc}"[:200])


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
    found = pd.DataFrame([_safe_estimate(
        str(name_cats[n]) if n >= 0 else "", cats["input_dims"][d] if d >= 0 else None,
        cats["input_types"][t] if t >= 0 else None,
        cats["concrete_inputs"][s] if s >= 0 else None) for n, d, t, s in uniques],
        columns=list(Estimate._fields)).iloc[codes] if len(uniques) else \
        pd.DataFrame({f: np.empty(0, dtype=object) for f in Estimate._fields})
    out_flops = found["flops"].to_numpy(dtype=np.float64, copy=True)
    out_bytes = found["bytes"].to_numpy(dtype=np.float64, copy=True)
    reason = np.array([r if isinstance(r, str) else None for r in found["reason"]], dtype=object)
    resolve_pending(table, found["pending"].to_numpy(dtype=object), out_flops, out_bytes, reason)
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
        "dtype": found["dtype"].to_numpy(dtype=object),
        "estimate": ~has_measure,
        "reason": pd.Series(np.where(has_measure, None, reason), dtype=object),
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
