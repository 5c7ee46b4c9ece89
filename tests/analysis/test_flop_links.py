"""FLOPs a call's own arguments leave open, told by another event
(`analysis.efficiency.flop_links`): a
PyTorch 1.x convolution sized by its backward node's grad_output shape (same sequence number),
a PyTorch 1.x conv backward counted by the `_input`/`_weight` calls under it. Each link's
absence and ambiguity is pinned too; on the real ResNet-50 (PyTorch 1.9) trace the linked
forward FLOPs are checked against the backward_input calls, which carry their own shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tb_plugin.analysis.efficiency.flops import op_flops
from tb_plugin.analysis.efficiency.roofline import build_roofline
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, make_table

pytestmark = pytest.mark.unit

# PyTorch 1.9's forms: no Concrete Inputs; conv2d(input, weight, bias, stride, padding,
# dilation, groups); the backward node records grad_output as its one input
CONV_TYPES = ["float", "float", "", "GenericList", "GenericList", "GenericList", "Int"]
X, W = [2, 4, 9, 9], [8, 4, 3, 3]


def _conv(ts: float, seq: int) -> dict:
    return cpu_op("aten::conv2d", ts, 10, **{"Input Dims": [X, W, [], [], [], [], []],
                                              "Input type": CONV_TYPES, "Sequence number": seq,
                                              "Fwd thread id": 0})


def _node(ts: float, seq: int, grad: list[int], name: str = "CudnnConvolutionBackward") -> dict:
    return cpu_op(name, ts, 10, tid=2, **{"Input Dims": [grad], "Input type": ["float"],
                                          "Sequence number": seq, "Fwd thread id": 1})


def _conv_flops(events: list[dict], tmp_path) -> tuple[list[float], list]:
    table = make_table(events, tmp_path)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    conv = rows[names == "aten::conv2d"]
    return conv["flops"].tolist(), conv["reason"].tolist()


def test_forward_conv_sized_by_its_backward_node(tmp_path) -> None:
    # stride 2, padding 1: out (9 + 2 - 3) // 2 + 1 = 5; the node's grad_output is [2, 8, 5, 5]
    per_output = 2 * 4 * 9  # 2 * Cin/groups * kernel taps
    flops, reasons = _conv_flops([_conv(0, 7), _conv(20, 8), _node(100, 7, [2, 8, 5, 5]),
                                  _node(120, 8, [2, 8, 9, 9], "ConvolutionBackward0")], tmp_path)
    assert flops == [per_output * 2 * 8 * 25, per_output * 2 * 8 * 81]
    assert reasons == [None, None]


@pytest.mark.parametrize(("nodes", "why"), [
    ([], "no backward node"),
    ([_node(100, 7, [2, 8, 5, 5]), _node(110, 7, [2, 8, 4, 4])], "two shapes for one seq"),
    ([_node(100, 7, [2, 6, 5, 5])], "channels differ from the weight's 8"),
    ([_node(100, 7, [3, 8, 5, 5])], "batch differs from the input's 2"),
    ([_node(100, 7, [2, 8, 5])], "rank differs"),
    ([_node(100, 8, [2, 8, 5, 5])], "another sequence number"),
    ([_node(100, 7, [2, 8, 5, 5], "AddmmBackward")], "not a convolution's node"),
])
def test_no_or_ambiguous_link_keeps_the_reason(tmp_path, nodes, why) -> None:
    flops, reasons = _conv_flops([_conv(0, 7), *nodes], tmp_path)
    assert math.isnan(flops[0]), why
    assert reasons == ["stride not recorded (the trace has no Concrete Inputs for it)"], why


BACKWARD_TYPES = ["float", "float", "float", "GenericList", "GenericList", "GenericList", "Int",
                  "Bool", "Bool", "Bool", "GenericList"]
MASK_REASON = "output_mask not recorded, and no *_backward_input/_weight call under it"
G = [2, 8, 5, 5]  # grad_output of x[2,4,9,9] * w[8,4,3,3], stride 2, padding 1


def _backward_rows(children: list[str], tmp_path) -> tuple[float, object]:
    events = [cpu_op("aten::cudnn_convolution_backward", 0, 100, **{
        "Input Dims": [X, G, W, [], [], [], [], [], [], [], []], "Input type": BACKWARD_TYPES})]
    for i, child in enumerate(children):
        events.append(cpu_op(child, 10 + 30 * i, 20, **{"Input Dims": [[], G, W],
                                                        "Input type": ["GenericList"]}))
    table = make_table(events, tmp_path)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    [row] = rows[names == "aten::cudnn_convolution_backward"].itertuples()
    return row.flops, row.reason


@pytest.mark.parametrize(("children", "gradients"), [
    (["aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight"], 2),
    (["aten::cudnn_convolution_backward_weight"], 1),
    (["aten::cudnn_convolution_backward_input"], 1),
])
def test_pytorch1_backward_counts_its_gradient_calls(tmp_path, children, gradients) -> None:
    forward = 2 * math.prod(G) * 4 * 9  # each gradient costs the forward
    assert _backward_rows(children, tmp_path) == (gradients * forward, None)


def test_pytorch1_backward_without_gradient_calls_says_why(tmp_path) -> None:
    flops, reason = _backward_rows(["aten::empty"], tmp_path)
    assert math.isnan(flops)
    assert reason == "output_mask not recorded, and no *_backward_input/_weight call under it"


@needs_shared
def test_resnet50_pt19_forward_equals_its_backward_input(tmp_path) -> None:
    """resnet50_gpu_pt19: the forward convolutions are sized through their backward nodes;
    `cudnn_convolution_backward_input` carries grad_output and weight itself, so its FLOPs are
    independent of the link. Every layer but the first (whose input needs no gradient) has
    one: forward - first layer == backward_input, and the backward = 2 x forward - first."""
    path = SHARED_TRACES / "resnet50_gpu_pt19" / "worker0.1623143089861.pt.trace.json.gz"
    table = load_trace(str(path), use_cache=False)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    dims = table.op_args["input_dims"].astype(object).to_numpy()
    conv = names == "aten::conv2d"
    assert rows["reason"][conv].isna().all()
    first = conv & (dims == str([[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []]))
    assert first.sum() == 6  # one per profiled step
    first_flops = 2.0 * 32 * 112 * 112 * 64 * 3 * 49  # 7x7 stride 2 padding 3: 224 -> 112
    forward = float(rows["flops"][conv].sum())
    backward_input = float(rows["flops"][names == "aten::cudnn_convolution_backward_input"].sum())
    assert forward - 6 * first_flops == backward_input
    [row] = [r for r in build_roofline(table)["rows"]
             if r["name"] == "aten::cudnn_convolution_backward"]
    assert row["flops"] == 2 * forward - 6 * first_flops
    assert np.isclose(forward / 6 / 32, 8.18e9, rtol=0.01)  # ResNet-50: 4.09 GMACs per image


def test_a_one_position_output_is_sized_and_an_empty_one_is_not(tmp_path) -> None:
    """The link needs an output of at least one element per dimension: 1x1 is counted, a 0
    dimension leaves the call unknown."""
    per_output = 2 * 4 * 9
    flops, reasons = _conv_flops([_conv(0, 7), _node(100, 7, [2, 8, 1, 1])], tmp_path)
    assert (flops, reasons) == ([per_output * 2 * 8 * 1 * 1], [None])
    flops, reasons = _conv_flops([_conv(0, 7), _node(100, 7, [2, 8, 0, 5])], tmp_path)
    assert math.isnan(flops[0])
    assert reasons == ["stride not recorded (the trace has no Concrete Inputs for it)"]


def test_a_backward_outside_the_op_tree_counts_no_gradient_calls(tmp_path) -> None:
    """A conv backward without a duration is no node of the op tree: it has no calls under it,
    so it stays unknown even though the trace's first op holds a `_backward_input` call."""
    backward = cpu_op("aten::cudnn_convolution_backward", 0, 100, **{
        "Input Dims": [X, G, W, [], [], [], [], [], [], [], []], "Input type": BACKWARD_TYPES})
    del backward["dur"]
    table = make_table([cpu_op("outer", 200, 100),
                        cpu_op("aten::cudnn_convolution_backward_input", 210, 20, **{
                            "Input Dims": [[], G, W], "Input type": ["GenericList"]}),
                        backward], tmp_path)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    [row] = rows[names == "aten::cudnn_convolution_backward"].itertuples()
    assert math.isnan(row.flops) and row.reason == MASK_REASON
    [inner] = rows[names == "aten::cudnn_convolution_backward_input"].itertuples()
    assert inner.flops == 2 * math.prod(G) * 4 * 9
