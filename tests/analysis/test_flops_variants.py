"""Every convolution, GEMM and attention variant the estimator knows, forward and backward,
CUDA/ROCm/CPU, PyTorch 1.x and 2.x layouts: random shapes are written in the argument form the
profiler records (`Input Dims`, `Input type`, `Concrete Inputs`, in the op's own argument
order) and the estimate must equal a brute-force count done here: output positions enumerated
one by one, products counted from the shapes numpy's matmul produces, attention's matrix
products listed one by one. Invalid geometry must give NaN and a reason, never an exception,
on both sides of each boundary."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tb_plugin.analysis.efficiency.flops import (
    ATTENTION_BACKWARD_OPS,
    ATTENTION_OPS,
    CONV_BACKWARD_OPS,
    CONV_OPS,
    MM_OPS,
    estimate,
)
from tb_plugin.analysis.efficiency.op_schemas import LAYOUTS

pytestmark = pytest.mark.unit

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
_LIST_TYPE = {"L": "GenericList", "B": "GenericList", "I": "Int", "F": "Bool", "O": "Scalar"}


def trace_form(layout: tuple[str, ...], values: dict[str, Any]) -> tuple[str, str, str]:
    """(Input Dims, Input type, Concrete Inputs) as the profiler writes one call with `values`
    (argument name -> tensor shape / list / int / bool) in `layout`'s argument order."""
    dims, types, concrete = [], [], []
    for item in layout:
        kind, name = item[0], item[2:]
        value = values.get(name)
        if kind == "T":
            dims.append(list(value) if value is not None else [])
            types.append("float" if value is not None else "")
            concrete.append("")
        else:
            dims.append([])
            types.append(_LIST_TYPE[kind])
            concrete.append("" if value is None else str(value))
    return str(dims), str(types), str(concrete)


def positions(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output positions of one spatial dimension, enumerated: the windows that fit inside the
    padded input."""
    count, start = 0, 0
    while start + dilation * (kernel - 1) <= size + 2 * padding - 1:
        count += 1
        start += stride
    return count


def transposed_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                    extra: int) -> int:
    """Output size of a transposed convolution: the last position any input element reaches."""
    reach = max(i * stride + k * dilation for i in range(size) for k in range(kernel))
    return reach + 1 - 2 * padding + extra


@st.composite
def geometries(draw: Any, dims: int, dilated: bool, grouped: bool) -> dict[str, Any]:
    groups = draw(st.integers(1, 3)) if grouped else 1
    kernel = draw(st.lists(st.integers(1, 4), min_size=dims, max_size=dims))
    stride = draw(st.lists(st.integers(1, 3), min_size=dims, max_size=dims))
    dilation = draw(st.lists(st.integers(1, 3), min_size=dims, max_size=dims)) if dilated \
        else [1] * dims
    padding = draw(st.lists(st.integers(0, 2), min_size=dims, max_size=dims))
    reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    size = [draw(st.integers(max(1, r - 2 * p), r + 6)) for r, p in zip(reach, padding)]
    extra = [draw(st.integers(0, min(s, d) - 1)) for s, d in zip(stride, dilation)]
    return {"n": draw(st.integers(1, 3)), "cin": groups * draw(st.integers(1, 3)),
            "cout": groups * draw(st.integers(1, 3)), "groups": groups, "kernel": kernel,
            "stride": stride, "padding": padding, "dilation": dilation, "size": size,
            "output_padding": extra}


def _dims_of(op: str) -> list[int]:
    if op.endswith("1d"):
        return [1]
    if "3d" in op:
        return [3]
    if "2d" in op or op == "_nnpack_spatial_convolution":
        return [2]
    return [1, 2, 3]


def _has(op: str, name: str) -> bool:
    return any(any(item[2:] == name for item in layout) for layout in LAYOUTS[op])


CONV_FORWARD = sorted(CONV_OPS)


def forward_flops(g: dict[str, Any], transposed: bool) -> tuple[float, list[int]]:
    """Brute force: multiply-adds = output positions x kernel taps x channels per group."""
    taps = math.prod(g["kernel"])
    if transposed:
        out = [transposed_size(*a) for a in zip(g["size"], g["kernel"], g["stride"],
                                                  g["padding"], g["dilation"],
                                                  g["output_padding"])]
        macs = g["n"] * g["cin"] * math.prod(g["size"]) * (g["cout"] // g["groups"]) * taps
        return 2.0 * macs, out
    out = [positions(*a) for a in zip(g["size"], g["kernel"], g["stride"], g["padding"],
                                      g["dilation"])]
    macs = g["n"] * g["cout"] * math.prod(out) * (g["cin"] // g["groups"]) * taps
    return 2.0 * macs, out


def conv_values(g: dict[str, Any], transposed: bool) -> dict[str, Any]:
    x = [g["n"], g["cin"], *g["size"]]
    w = [g["cin"], g["cout"] // g["groups"], *g["kernel"]] if transposed else \
        [g["cout"], g["cin"] // g["groups"], *g["kernel"]]
    return {"input": x, "self": x, "weight": w, "stride": g["stride"],
            "padding": g["padding"], "dilation": g["dilation"], "groups": g["groups"],
            "output_padding": g["output_padding"], "transposed": transposed,
            "kernel_size": g["kernel"], "benchmark": False, "deterministic": False,
            "allow_tf32": True, "cudnn_enabled": True}


def _cases(ops: list[str]) -> list[Any]:
    return [pytest.param(op, i, dims, id=f"{op}-layout{i}-{dims}d") for op in ops
            for i in range(len(LAYOUTS[op])) for dims in _dims_of(op)]


def _draw_conv(data: Any, op: str, dims: int) -> tuple[dict[str, Any], bool]:
    g = data.draw(geometries(dims, _has(op, "dilation"), _has(op, "groups")))
    transposed = data.draw(st.booleans()) if _has(op, "transposed") else "transpose" in op
    if not transposed:
        g["output_padding"] = [0] * dims
    return g, transposed


@pytest.mark.parametrize(("op", "index", "dims"), _cases(CONV_FORWARD))
@SETTINGS
@given(data=st.data())
def test_conv_forward_variants(op: str, index: int, dims: int, data: Any) -> None:
    layout = LAYOUTS[op][index]
    g, transposed = _draw_conv(data, op, dims)
    values = conv_values(g, transposed)
    expected, out = forward_flops(g, transposed)
    assume(min(out) >= 1)  # a transposed convolution may have no output
    flops, bytes_, _, reason, _ = estimate(f"aten::{op}", *trace_form(layout, values))
    assert (flops, reason) == (expected, None), values
    elems = math.prod(values["input"]) + math.prod(values["weight"]) + \
        g["n"] * g["cout"] * math.prod(out)
    assert bytes_ == 4 * elems


@pytest.mark.parametrize(("op", "index", "dims"), _cases(sorted(CONV_BACKWARD_OPS)))
@SETTINGS
@given(data=st.data(), mask=st.lists(st.booleans(), min_size=3, max_size=3))
def test_conv_backward_variants(op: str, index: int, dims: int, data: Any, mask: list[bool]
                                ) -> None:
    """Each gradient costs the forward's FLOPs; how many the call computes comes from the op
    (`_input`, `_weight`) or its output_mask."""
    layout = LAYOUTS[op][index]
    g, transposed = _draw_conv(data, op, dims)
    values = conv_values(g, transposed)
    forward, out = forward_flops(g, transposed)
    assume(min(out) >= 1)
    values["grad_output"] = [g["n"], g["cout"], *out]
    values["self_size"], values["weight_size"] = values["input"], values["weight"]
    values["output_mask"] = mask
    if op.endswith(("_backward_input", "_backward_weight", "_backward_weights")):
        gradients = 1
    else:
        gradients = int(mask[0]) + int(mask[1])
    flops, _, _, reason, _ = estimate(f"aten::{op}", *trace_form(layout, values))
    assert (flops, reason) == (gradients * forward, None), values


def _matmul_oracle(a: list[int], b: list[int]) -> tuple[float, tuple[int, ...]]:
    """Products counted from the output numpy's matmul produces: each output element is one
    K-long dot product."""
    out = np.matmul(np.zeros(a, dtype=np.int8), np.zeros(b, dtype=np.int8)).shape
    return 2.0 * math.prod(out) * a[-1], out


_SMALL = st.integers(1, 6)


@st.composite
def gemm_case(draw: Any, op: str) -> tuple[dict[str, Any], float, int]:
    m, k, n, b = draw(_SMALL), draw(_SMALL), draw(_SMALL), draw(_SMALL)
    if op in ("mm", "_int_mm", "_scaled_mm"):
        flops, out = _matmul_oracle([m, k], [k, n])
        return {"self": [m, k], "mat2": [k, n], "scale_a": [1], "scale_b": [1]}, flops, \
            math.prod(out)
    if op in ("addmm", "_addmm_activation"):
        flops, out = _matmul_oracle([m, k], [k, n])
        return {"self": [n], "mat1": [m, k], "mat2": [k, n], "beta": 1, "alpha": 1}, flops, \
            math.prod(out)
    if op in ("bmm",):
        flops, out = _matmul_oracle([b, m, k], [b, k, n])
        return {"self": [b, m, k], "mat2": [b, k, n]}, flops, math.prod(out)
    if op in ("baddbmm", "addbmm"):
        flops, out = _matmul_oracle([b, m, k], [b, k, n])
        summed = m * n if op == "addbmm" else math.prod(out)  # addbmm sums over the batch
        return {"self": [m, n], "batch1": [b, m, k], "batch2": [b, k, n]}, flops, summed
    if op == "linear":
        lead = draw(st.lists(_SMALL, min_size=0, max_size=2))
        vector = draw(st.booleans())
        w = [k] if vector else [n, k]
        flops, out = _matmul_oracle([*lead, k], [k] if vector else [k, n])
        return {"input": [*lead, k], "weight": w, "bias": None}, flops, math.prod(out)
    # matmul: 1-D operands are vectors; batches broadcast
    a = draw(st.lists(_SMALL, min_size=0, max_size=2)) + ([m, k] if draw(st.booleans()) else [k])
    b_shape = [k] if draw(st.booleans()) else [k, n]
    b_batch = [1 if draw(st.booleans()) else x for x in a[:-2]][-draw(st.integers(0, 2)):] \
        if len(a) > 2 and len(b_shape) == 2 else []
    flops, out = _matmul_oracle(a, [*b_batch, *b_shape])
    return {"self": a, "other": [*b_batch, *b_shape]}, flops, math.prod(out)


@pytest.mark.parametrize("op", sorted(MM_OPS))
def test_gemm_variants(op: str) -> None:
    [layout] = LAYOUTS[op]

    @SETTINGS
    @given(case=gemm_case(op))
    def check(case: tuple[dict[str, Any], float, int]) -> None:
        values, expected, out = case
        dims, types, concrete = trace_form(layout, values)
        flops, bytes_, _, reason, _ = estimate(f"aten::{op}", dims, types, concrete)
        assert (flops, reason) == (expected, None), values
        read = sum(math.prod(values[i[2:]]) for i in layout
                   if i[0] == "T" and values.get(i[2:]) is not None)
        assert bytes_ == 4 * (read + out)

    check()


def attention_products(b: int, h: int, lq: int, lk: int, d: int, dv: int, backward: bool
                       ) -> float:
    """The matrix products of attention, listed: forward S = QK^T, O = PV; backward recomputes
    S, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q."""
    products = [(lq, d, lk), (lq, lk, dv)]  # (rows, inner, columns)
    if backward:
        products = [(lq, d, lk), (lq, dv, lk), (lk, lq, dv), (lq, lk, d), (d, lq, lk)]
    return 2.0 * b * h * sum(r * i * c for r, i, c in products)


_BLHD = ("_flash_attention_forward", "_efficient_attention_forward",
         "_flash_attention_backward", "_efficient_attention_backward")


@pytest.mark.parametrize("op", sorted(ATTENTION_OPS | ATTENTION_BACKWARD_OPS))
def test_attention_variants(op: str) -> None:
    [layout] = LAYOUTS[op]
    backward = op in ATTENTION_BACKWARD_OPS

    @SETTINGS
    @given(b=_SMALL, h=_SMALL, lq=st.integers(1, 40), lk=st.integers(1, 40), d=_SMALL,
           dv=_SMALL)
    def check(b: int, h: int, lq: int, lk: int, d: int, dv: int) -> None:
        def shape(length: int, depth: int) -> list[int]:
            return [b, length, h, depth] if op in _BLHD else [b, h, length, depth]

        values = {"query": shape(lq, d), "key": shape(lk, d), "value": shape(lk, dv),
                  "grad_out": shape(lq, dv), "grad_out_": shape(lq, dv)}
        flops, _, _, reason, _ = estimate(f"aten::{op}", *trace_form(layout, values))
        assert (flops, reason) == (attention_products(b, h, lq, lk, d, dv, backward), None)

    check()


def _conv2d(stride: Any, padding: Any, dilation: Any, size: int = 5, kernel: int = 3,
            op: str = "miopen_convolution") -> tuple[float, Optional[str]]:
    [layout] = LAYOUTS[op]
    values = {"self": [1, 2, size, size], "weight": [4, 2, kernel, kernel], "stride": stride,
              "padding": padding, "dilation": dilation, "groups": 1, "benchmark": False,
              "deterministic": False}
    flops, _, _, reason, _ = estimate(f"aten::{op}", *trace_form(layout, values))
    return flops, reason


def test_geometry_boundaries() -> None:
    """Stride and dilation must be at least 1, padding at least 0, the output at least one
    position: one step inside each boundary is counted, one step outside is NaN with a
    reason, and nothing raises."""
    taps = 2 * 4 * 2 * 9  # 2 * Cout * Cin * kernel taps, per output position
    assert _conv2d([1, 1], [0, 0], [1, 1]) == (taps * 3 * 3, None)
    flops, reason = _conv2d([0, 1], [0, 0], [1, 1])
    assert math.isnan(flops) and reason.startswith("invalid geometry: stride [0, 1]")
    flops, reason = _conv2d([1, 1], [0, 0], [1, 0])
    assert math.isnan(flops) and reason.startswith("invalid geometry")
    flops, reason = _conv2d([1, 1], [-1, 0], [1, 1])
    assert math.isnan(flops) and reason.startswith("invalid geometry")
    # a 1x1 convolution with padding 0 (the ROCm crash: padding [0, 0] read as stride)
    assert _conv2d([1, 1], [0, 0], [1, 1], kernel=1) == (2 * 4 * 2 * 25, None)
    # output size (5 + 2p - d*2 - 1) // 1 + 1: dilation 2 -> 1 position; dilation 3 -> none
    assert _conv2d([1, 1], [0, 0], [2, 2]) == (taps, None)
    flops, reason = _conv2d([1, 1], [0, 0], [3, 3])
    assert math.isnan(flops) and "gives an empty output" in reason
    # a geometry the trace did not record, or that is not a list of ints
    flops, reason = _conv2d(None, [0, 0], [1, 1])
    assert math.isnan(flops) and reason.startswith("stride not recorded")
    flops, reason = _conv2d("[1, 1, 1]", [0, 0], [1, 1])
    assert math.isnan(flops) and reason == "stride [1, 1, 1] does not fit 2 spatial dimensions"


def test_pytorch1_layouts_are_told_apart() -> None:
    """PyTorch 1.7's cudnn_convolution has a bias third, 1.8+ has padding there: the recorded
    types pick the layout (real forms from resnet50_gpu_pt19 and a 1.7 trace)."""
    expected = 2.0 * 2 * 8 * 3 * 3 * 4 * 9  # x[2,4,5,5] w[8,4,3,3] stride 1 padding 0: 3x3
    new = estimate("aten::cudnn_convolution", "[[2, 4, 5, 5], [8, 4, 3, 3], [], [], [], [], [],"
                   " [], []]", "['float', 'float', 'GenericList', 'GenericList', 'GenericList',"
                   " 'Int', 'Bool', 'Bool', 'Bool']",
                   "['', '', '[0, 0]', '[1, 1]', '[1, 1]', '1', 'False', 'False', 'True']")
    old = estimate("aten::cudnn_convolution", "[[2, 4, 5, 5], [8, 4, 3, 3], [8], [], [], [], [],"
                   " [], []]", "['float', 'float', 'float', 'GenericList', 'GenericList',"
                   " 'GenericList', 'Int', 'Bool', 'Bool']",
                   "['', '', '', '[0, 0]', '[1, 1]', '[1, 1]', '1', 'False', 'False']")
    assert (new.flops, new.reason) == (expected, None)
    assert (old.flops, old.reason) == (expected, None)


def test_hostile_arguments_cost_a_reason_not_an_exception() -> None:
    for dims, types, concrete in (
            ("[[2, 4, 5, 5], [8, 3, 3, 3]]", "['float', 'float']", None),  # channels mismatch
            ("[[2, 4, 5], [8, 4, 3, 3]]", "['float', 'float']", None),  # ranks differ
            ("[[2, 4, 5, 5]]", "['float']", None),  # no weight
            ("[[2, 4, 5, 5], [8, 4, 3, 3], [], [], [], [], [], [], []]", "[]",
             "['', '', '', 'x(', '[1, 1]', '[1, 1]', '1', 'False', 'False']"),
            ("not a list", "['float']", "['']")):
        result = estimate("aten::miopen_convolution", dims, types, concrete)
        assert math.isnan(result.flops) and isinstance(result.reason, str)
    result = estimate("aten::mm", "[[4, 5], [6, 7]]", "['float', 'float']", None)
    assert math.isnan(result.flops) and "is not a matrix product" in result.reason
