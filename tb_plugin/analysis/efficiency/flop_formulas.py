"""FLOPs of one GEMM, convolution or attention call, its arguments read by name.

The profiler records an op's arguments by position (`Input Dims`, `Input type`,
`Concrete Inputs`), and the positions differ between ops (`aten::convolution` is
`(input, weight, bias, stride, padding, ...)`, `aten::miopen_convolution` is
`(self, weight, bias, padding, stride, ...)`, PyTorch 1.8+'s `aten::cudnn_convolution` has no
bias at all). `bind` names them from the op's schema (`op_schemas.LAYOUTS`, generated from
torch's schemas); when an op has several layouts, the one whose tensor positions fit the
recorded shapes wins.

Every formula returns a value or raises `Unknown` with the reason (a stride of 0, a padding
that empties the output, shapes that do not multiply, a geometry the trace did not record),
never another exception on a trace's input. Conventions (torch.utils.flop_counter's, a
multiply-add = 2 FLOPs, bias adds not counted):

- GEMMs: 2*M*K*N per matrix product (batched: times the broadcast batch).
- convolution: 2 * N * prod(output spatial) * Cout * Cin/groups * prod(kernel); transposed:
  2 * N * prod(input spatial) * Cin * Cout/groups * prod(kernel). Each gradient of a
  convolution's backward (input, weight) costs the forward's FLOPs; torch's counter agrees
  except for the weight gradient of a grouped convolution, which it counts without the 1/groups.
- attention forward 2*B*H*Lq*Lk*(D + Dv); backward 2*B*H*Lq*Lk*(3*D + 2*Dv) (scores
  recomputed, then four products: 2.5x the forward when D = Dv).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .op_schemas import LAYOUTS


class Unknown(Exception):
    """The FLOPs of this call cannot be known from what the trace recorded; str() says why."""


class NotRecorded(Unknown):
    """An argument the formula needs is absent from the trace (no `Concrete Inputs`)."""


@dataclass(frozen=True)
class Arg:
    shape: Optional[list[int]]  # a tensor's recorded shape; None for anything else
    type: str
    value: Optional[str]  # the `Concrete Inputs` text; None when the trace has none


_NOT_TENSOR = frozenset(("GenericList", "ScalarList", "IntList", "Int", "Bool", "Scalar",
                         "Double", "String", "Device", "Layout", "ScalarType", "TensorList"))
NO_ARG = Arg(None, "", None)


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 0 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)


def bind(base: str, dims: list, types: list[str], concrete: Optional[list]) -> dict[str, Arg]:
    """Argument name -> Arg for one call of `aten::<base>`; {} for an op without a layout."""
    layouts = LAYOUTS.get(base)
    if not layouts:
        return {}
    n = len(dims)

    def conflicts(layout: tuple[str, ...]) -> tuple[int, int]:
        bad = 0
        for i, item in enumerate(layout[:n]):
            tensor = item[0] == "T"
            recorded = _is_shape(dims[i])
            kind = types[i] if i < len(types) else ""
            # a None tensor is recorded with type "", a list/int/bool never is
            if (tensor and kind in _NOT_TENSOR) or (not tensor and (recorded or kind == "")):
                bad += 1
        return bad, abs(len(layout) - n)

    layout = min(layouts, key=conflicts)
    out = {item[2:]: NO_ARG for item in layout[n:]}  # not recorded: unknown, not defaulted
    for i, item in enumerate(layout[:n]):
        value = concrete[i] if concrete is not None and i < len(concrete) else None
        shape = dims[i] if isinstance(dims[i], list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in dims[i]) else None
        out[item[2:]] = Arg(shape if item[0] == "T" else None,
                            types[i] if i < len(types) else "",
                            str(value) if value is not None else None)
    return out


def _tensor(args: dict[str, Arg], *names: str) -> list[int]:
    for name in names:
        if name in args and args[name].shape is not None:
            return args[name].shape
    raise Unknown(f"no shape recorded for {'/'.join(names)}")


def _value(args: dict[str, Arg], name: str) -> Any:
    """The literal of a recorded scalar/list argument; Unknown when not recorded."""
    arg = args.get(name)
    if arg is None or arg.value is None or not arg.value.strip():
        raise NotRecorded(f"{name} not recorded (the trace has no Concrete Inputs for it)")
    text = arg.value.strip()
    if text in ("same", "valid"):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise Unknown(f"{name} {text[:40]!r} is not a literal") from None


def _ints(args: dict[str, Arg], name: str, count: int, default: Optional[int]) -> list[int]:
    """An int-list argument as `count` ints (one value repeats); `default` when the op's
    layout has no such argument."""
    if name not in args:
        if default is None:
            raise NotRecorded(f"{name} not recorded")
        return [default] * count
    value = _value(args, name)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * count
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value) and \
            len(value) in (1, count):
        return list(value) * count if len(value) == 1 else list(value)
    raise Unknown(f"{name} {value!r} does not fit {count} spatial dimensions")


def _flag(args: dict[str, Arg], name: str, default: bool) -> bool:
    if name not in args:
        return default
    value = _value(args, name)
    if not isinstance(value, bool):
        raise Unknown(f"{name} {value!r} is not a bool")
    return value


def _check_conv(x: list[int], w: list[int]) -> int:
    if len(x) < 3 or len(w) != len(x):
        raise Unknown(f"input {x} and weight {w} are not a convolution's")
    if min(x[1:]) < 0 or min(w) <= 0:
        raise Unknown(f"input {x} or weight {w} has an empty dimension")
    return len(x) - 2


def conv_output(args: dict[str, Arg], x: list[int], w: list[int]) -> list[int]:
    """Spatial size of a (non-transposed) convolution's output; Unknown for invalid geometry:
    stride or dilation below 1, negative padding, or an output of no elements."""
    dims = len(x) - 2
    stride = _ints(args, "stride", dims, 1)
    dilation = _ints(args, "dilation", dims, 1)
    padding = _value(args, "padding") if "padding" in args else 0
    if padding == "valid":
        padding = [0] * dims
    elif padding == "same":
        if stride != [1] * dims:
            raise Unknown("padding 'same' needs stride 1")
        return list(x[2:])
    else:
        padding = _ints(args, "padding", dims, 0)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise Unknown(f"invalid geometry: stride {stride}, padding {padding}, "
                      f"dilation {dilation}")
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
           zip(x[2:], stride, padding, dilation, w[2:])]
    if min(out) < 1:
        raise Unknown(f"input {x[2:]} with kernel {w[2:]}, stride {stride}, padding "
                      f"{padding}, dilation {dilation} gives an empty output")
    return out


def transposed_output(args: dict[str, Arg], x: list[int], w: list[int]) -> list[int]:
    dims = len(x) - 2
    stride = _ints(args, "stride", dims, 1)
    dilation = _ints(args, "dilation", dims, 1)
    padding = _ints(args, "padding", dims, 0)
    extra = _ints(args, "output_padding", dims, 0)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(extra) < 0:
        raise Unknown(f"invalid geometry: stride {stride}, padding {padding}, dilation "
                      f"{dilation}, output_padding {extra}")
    out = [(i - 1) * s - 2 * p + d * (k - 1) + e + 1 for i, s, p, d, k, e in
           zip(x[2:], stride, padding, dilation, w[2:], extra)]
    if min(out) < 1:
        raise Unknown(f"transposed convolution of {x[2:]} gives an empty output {out}")
    return out


def _transposed(base: str, args: dict[str, Arg]) -> bool:
    return "transpose" in base or _flag(args, "transposed", False)


def _groups(args: dict[str, Arg]) -> int:
    if "groups" not in args:
        return 1
    value = _value(args, "groups")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Unknown(f"groups {value!r} is not a positive int")
    return value


def conv_forward(base: str, args: dict[str, Arg]) -> tuple[float, Optional[list[int]]]:
    """(FLOPs, output shape or None when only the FLOPs are known) of a forward convolution."""
    x, w = _tensor(args, "input", "self"), _tensor(args, "weight")
    _check_conv(x, w)
    if _transposed(base, args):
        if x[1] != w[0]:
            raise Unknown(f"input channels {x[1]} differ from the weight's {w[0]}")
        flops = 2.0 * x[0] * math.prod(x[2:]) * math.prod(w)
        try:
            out: Optional[list[int]] = [x[0], w[1] * _groups(args),
                                        *transposed_output(args, x, w)]
        except Unknown:
            out = None
        return flops, out
    groups = x[1] // w[1] if x[1] % w[1] == 0 else 0  # weight [Cout, Cin/groups, k...]
    if groups < 1 or w[0] % groups:
        raise Unknown(f"input channels {x[1]} do not fit weight {w}")
    spatial = conv_output(args, x, w)
    return 2.0 * x[0] * math.prod(spatial) * math.prod(w), [x[0], w[0], *spatial]


def conv_per_output(base: str, args: dict[str, Arg]) -> tuple[float, int, int, int]:
    """For a (non-transposed) convolution whose geometry was not recorded: (FLOPs per output
    element, 2 * Cin/groups * prod(kernel); the output's rank, batch and channels)."""
    x, w = _tensor(args, "input", "self"), _tensor(args, "weight")
    _check_conv(x, w)
    if _transposed(base, args) or x[1] % w[1]:
        raise Unknown(f"input {x} and weight {w} do not fit a convolution")
    return 2.0 * math.prod(w[1:]), len(x), x[0], w[0]


def conv_gradients(base: str, args: dict[str, Arg]) -> Optional[int]:
    """How many of grad_input and grad_weight a conv backward computes; None when its
    output_mask was not recorded (PyTorch 1.x traces, traces without Concrete Inputs)."""
    if base.endswith(("_backward_input", "_backward_weight", "_backward_weights")):
        return 1
    if "output_mask" not in args:
        return 2
    try:
        mask = _value(args, "output_mask")
    except Unknown:
        return None
    if not isinstance(mask, (list, tuple)) or len(mask) < 2 or \
            not all(isinstance(m, bool) for m in mask):
        raise Unknown(f"output_mask {mask!r} is not a list of bools")
    return int(mask[0]) + int(mask[1])


def conv_backward_each(base: str, args: dict[str, Arg]) -> float:
    """FLOPs of one gradient (input or weight) of a convolution: the forward's FLOPs."""
    transposed = _transposed(base, args)
    w = _tensor(args, "weight") if "weight" in args else _size(args, "weight_size")
    if transposed:
        if "self" in args or "input" in args:
            x = _tensor(args, "self", "input")
        else:  # transpose_backward_input(grad_output, weight, ...): x is the regular output
            g = _tensor(args, "grad_output")
            _check_conv(g, [w[1], w[0], *w[2:]])
            x = [g[0], w[0], *conv_output(args, g, w)]
        _check_conv(x, w)
        return 2.0 * math.prod(x) * math.prod(w[1:])
    g = _tensor(args, "grad_output")
    _check_conv(g, w)
    if g[1] != w[0]:
        raise Unknown(f"grad_output channels {g[1]} differ from weight {w}")
    return 2.0 * math.prod(g) * math.prod(w[1:])


def _size(args: dict[str, Arg], name: str) -> list[int]:
    value = _value(args, name)
    if not _is_shape(list(value) if isinstance(value, (list, tuple)) else value):
        raise Unknown(f"{name} {value!r} is not a shape")
    return list(value)


def _pair(args: dict[str, Arg], first: str, second: str) -> tuple[list[int], list[int]]:
    return _tensor(args, first), _tensor(args, second)


def _mm(a: list[int], b: list[int]) -> float:
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        raise Unknown(f"{a} @ {b} is not a matrix product")
    return 2.0 * a[0] * a[1] * b[1]


def _bmm(a: list[int], b: list[int]) -> float:
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        raise Unknown(f"{a} @ {b} is not a batched matrix product")
    return 2.0 * a[0] * a[1] * a[2] * b[2]


def matmul_shapes(a: list[int], b: list[int]) -> tuple[float, list[int]]:
    """(FLOPs, output shape) of torch.matmul: 1-D operands are vectors, batches broadcast."""
    if not a or not b:
        raise Unknown("matmul of a 0-d tensor")
    a2 = [1, a[0]] if len(a) == 1 else a
    b2 = [b[0], 1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise Unknown(f"{a} @ {b}: inner dimensions differ")
    try:
        batch = list(np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2])))
    except ValueError:
        raise Unknown(f"{a} @ {b}: batch dimensions do not broadcast") from None
    out = batch + ([a2[-2]] if len(a) > 1 else []) + ([b2[-1]] if len(b) > 1 else [])
    return 2.0 * math.prod(batch) * a2[-2] * a2[-1] * b2[-1], out


def gemm(base: str, args: dict[str, Arg]) -> tuple[float, list[int]]:
    """(FLOPs, output shape) of the GEMM family."""
    if base in ("mm", "_int_mm", "_scaled_mm"):
        a, b = _pair(args, "self", "mat2")
        return _mm(a, b), [a[0], b[1]]
    if base in ("addmm", "_addmm_activation"):
        a, b = _pair(args, "mat1", "mat2")
        return _mm(a, b), [a[0], b[1]]
    if base == "bmm":
        a, b = _pair(args, "self", "mat2")
        return _bmm(a, b), [a[0], a[1], b[2]]
    if base in ("baddbmm", "addbmm"):
        a, b = _pair(args, "batch1", "batch2")
        return _bmm(a, b), ([a[0], a[1], b[2]] if base == "baddbmm" else [a[1], b[2]])
    if base == "matmul":
        return matmul_shapes(*_pair(args, "self", "other"))
    x, w = _pair(args, "input", "weight")  # linear: y = x W^T, W [N, K] or [K]
    rows = [w[0]] if len(w) == 2 else []
    if len(w) not in (1, 2) or w[-1] != x[-1]:
        raise Unknown(f"linear of {x} with weight {w}: sizes differ")
    return 2.0 * math.prod(x[:-1]) * x[-1] * math.prod(rows), [*x[:-1], *rows]


_BLHD = ("_flash_attention_forward", "_efficient_attention_forward",
         "_flash_attention_backward", "_efficient_attention_backward")


def attention(base: str, args: dict[str, Arg], backward: bool) -> float:
    """Attention FLOPs from query, key, value ([B, H, L, D], or [B, L, H, D] for the
    `_flash/_efficient_attention_*` kernels)."""
    q, k, v = _tensor(args, "query"), _tensor(args, "key"), _tensor(args, "value")
    if not len(q) == len(k) == len(v) == 4:
        raise Unknown(f"query {q}, key {k}, value {v} are not 4-D")
    if base in _BLHD:
        q, k, v = ([t[0], t[2], t[1], t[3]] for t in (q, k, v))
    b, h, lq, d = q
    if not (k[0] == v[0] == b and k[3] == d and k[2] == v[2] and k[1] == v[1]):
        raise Unknown(f"query {q}, key {k}, value {v} do not fit together")
    lk, dv = k[2], v[3]
    if backward:
        return 2.0 * b * h * lq * lk * (3 * d + 2 * dv)
    return 2.0 * b * h * lq * lk * (d + dv)
