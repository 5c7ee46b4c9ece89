"""FLOPs and bytes per operator: each supported op's formula derived by hand here, and the
shape-based estimate checked against torch's own `with_flops=True` counter on a CPU recording."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tb_plugin.analysis.efficiency.flops import estimate, op_flops
from tb_plugin.analysis.efficiency.roofline import build_roofline

from .helpers import cpu_op, make_table

pytestmark = pytest.mark.unit

F32, BF16 = "float", "c10::BFloat16"


def _types(*names: str) -> str:
    return str(list(names))


@pytest.mark.parametrize(("name", "dims", "types", "flops", "bytes_"), [
    # mm: C[64,48] = A[64,32] B[32,48]; one multiply-add = 2 FLOPs
    ("aten::mm", [[64, 32], [32, 48]], (F32, F32), 2 * 64 * 32 * 48,
     4 * (64 * 32 + 32 * 48 + 64 * 48)),
    # addmm: bias first, not counted in FLOPs (torch's convention), read in bytes
    ("aten::addmm", [[48], [64, 32], [32, 48]], (F32, F32, F32), 2 * 64 * 32 * 48,
     4 * (48 + 64 * 32 + 32 * 48 + 64 * 48)),
    ("aten::bmm", [[4, 8, 16], [4, 16, 5]], (BF16, BF16), 2 * 4 * 8 * 16 * 5,
     2 * (4 * 8 * 16 + 4 * 16 * 5 + 4 * 8 * 5)),
    ("aten::baddbmm", [[4, 8, 5], [4, 8, 16], [4, 16, 5]], (F32,) * 3, 2 * 4 * 8 * 16 * 5,
     4 * (4 * 8 * 5 + 4 * 8 * 16 + 4 * 16 * 5 + 4 * 8 * 5)),
    # matmul broadcasts the batch: [2,3,4,5] @ [5,6] -> [2,3,4,6]
    ("aten::matmul", [[2, 3, 4, 5], [5, 6]], (F32, F32), 2 * (2 * 3) * 4 * 5 * 6,
     4 * (2 * 3 * 4 * 5 + 5 * 6 + 2 * 3 * 4 * 6)),
    # linear: x[8,16,32] W[64,32] (+ bias[64]) -> [8,16,64]
    ("aten::linear", [[8, 16, 32], [64, 32], [64]], (F32,) * 3, 2 * 8 * 16 * 32 * 64,
     4 * (8 * 16 * 32 + 64 * 32 + 64 + 8 * 16 * 64)),
])
def test_matmul_family(name, dims, types, flops, bytes_) -> None:
    got_flops, got_bytes, dtype, reason, _ = estimate(name, str(dims), _types(*types), None)
    assert reason is None
    assert got_flops == flops
    assert got_bytes == bytes_
    assert dtype == ("bf16" if types[0] == BF16 else "fp32")


def test_convolutions() -> None:
    # conv2d x[2,3,17,17] w[8,3,3,3] stride 2 padding 1: out = (17 + 2 - 2 - 1) // 2 + 1 = 9
    flops, bytes_, *_ = estimate("aten::conv2d", "[[2, 3, 17, 17], [8, 3, 3, 3], [8], [], [], [],"
                                " []]", _types(F32, F32, F32, "ScalarList", "ScalarList",
                                                "ScalarList", "Scalar"),
                                "['', '', '', '[2, 2]', '[1, 1]', '[1, 1]', '1']")
    assert flops == 2 * 2 * 9 * 9 * 8 * 3 * 3 * 3
    assert bytes_ == 4 * (2 * 3 * 17 * 17 + 8 * 3 * 3 * 3 + 8 + 2 * 8 * 9 * 9)
    # conv1d x[4,16,100] w[32,16,5], no padding, stride 1, dilation 2: out = 100 - 2*4 = 92
    flops, *_ = estimate("aten::conv1d", "[[4, 16, 100], [32, 16, 5], [], [], [], [], []]",
                           _types(F32, F32), "['', '', '', '[1]', '[0]', '[2]', '1']")
    assert flops == 2 * 4 * 92 * 32 * 16 * 5
    # a trace without Concrete Inputs (PyTorch 1.x) does not say the stride: unknown, why
    flops, bytes_, _, reason, _ = estimate(
        "aten::conv3d", "[[1, 2, 6, 6, 6], [4, 2, 3, 3, 3], [], [], [], [], []]",
        _types(F32, F32, "", "GenericList", "GenericList", "GenericList", "Int"), None)
    assert np.isnan(flops) and np.isnan(bytes_)
    assert reason == "stride not recorded (the trace has no Concrete Inputs for it)"
    # transposed: torch counts over the input's spatial size: 2*N*prod(in)*w0*w1*prod(k)
    flops, *_ = estimate("aten::conv_transpose2d", "[[2, 8, 5, 5], [8, 4, 3, 3]]",
                           _types(F32, F32), "['', '', '', '[2, 2]', '[0, 0]', '[0, 0]', '1', "
                           "'[1, 1]']")
    assert flops == 2 * 2 * 5 * 5 * 8 * 4 * 9
    # convolution_backward(grad_out[2,8,9,9], input, weight[8,3,3,3], ..., output_mask):
    # each gradient costs the forward; [True, True, False] = 2x the forward
    dims = "[[2, 8, 9, 9], [2, 3, 17, 17], [8, 3, 3, 3], [], [], [], [], [], [], [], []]"
    scalars = "['', '', '', '[8]', '[2, 2]', '[1, 1]', '[1, 1]', 'False', '[0, 0]', '1', '{}']"
    for mask, gradients in (("[True, True, False]", 2), ("[False, True, True]", 1),
                            ("[False, False, True]", 0)):
        flops, *_ = estimate("aten::convolution_backward", dims, _types(F32, F32, F32),
                             scalars.format(mask))
        assert flops == gradients * (2 * 2 * 9 * 9 * 8 * 3 * 3 * 3)


def test_attention() -> None:
    # q,k,v [B=8, H=16, L=4096, D=128]: QK^T and PV, 2*B*H*Lq*Lk*D each
    q = [8, 16, 4096, 128]
    flops, bytes_, dtype, *_ = estimate("aten::_scaled_dot_product_flash_attention",
                                    str([q, q, q, [], []]), _types(BF16, BF16, BF16), None)
    assert flops == 2 * (2 * 8 * 16 * 4096 * 4096 * 128)
    assert bytes_ == 2 * 4 * math.prod(q)  # q, k, v read, output written
    assert dtype == "bf16"
    # _flash_attention_forward is [B, L, H, D]; Lk differs from Lq, Dv from D
    flops, *_ = estimate("aten::_flash_attention_forward",
                           str([[2, 10, 4, 64], [2, 30, 4, 64], [2, 30, 4, 32]]),
                           _types(BF16, BF16, BF16), None)
    assert flops == 2 * 2 * 4 * 10 * 30 * 64 + 2 * 2 * 4 * 10 * 30 * 32
    # backward: grad_out first, then q, k, v; the scores recomputed (QK^T), then dV, dP, dQ,
    # dK: 5 products, 2.5x the forward (torch's sdpa_backward_flop_count)
    flops, *_ = estimate("aten::_scaled_dot_product_flash_attention_backward",
                         str([q, q, q, q]), _types(BF16,) * 4, None)
    assert flops == 5 * (2 * 8 * 16 * 4096 * 4096 * 128)


def test_elementwise_and_reductions_are_bytes_moved() -> None:
    # add [1024,256] + [256]: 1 FLOP per output element; reads both, writes [1024,256]
    flops, bytes_, *_ = estimate("aten::add", "[[1024, 256], [256], []]",
                                _types(BF16, BF16, "Scalar"), None)
    assert flops == 1024 * 256
    assert bytes_ == 2 * (1024 * 256 + 256 + 1024 * 256)
    flops, bytes_, *_ = estimate("aten::relu_", "[[100]]", _types(F32), None)  # in place
    assert (flops, bytes_) == (100, 4 * 200)
    flops, bytes_, *_ = estimate("aten::sum", "[[64, 1000], []]", _types(F32, "ScalarList"), None)
    assert (flops, bytes_) == (64 * 1000, 4 * 64 * 1000)  # the reduced output is not counted
    flops, bytes_, *_ = estimate("aten::_softmax", "[[64, 1000], [], []]", _types(F32), None)
    assert (flops, bytes_) == (64 * 1000, 4 * 2 * 64 * 1000)
    assert all(np.isnan(v) for v in estimate("aten::view", "[[4, 4], []]", _types(F32), None)[:2])


def test_recorded_flops_win_and_rows_say_estimate(tmp_path) -> None:
    events = [
        cpu_op("ProfilerStep#1", 0, 1000),
        cpu_op("aten::mm", 10, 100, **{"Input Dims": [[64, 32], [32, 48]],
                                       "Input type": ["float", "float"], "flops": 12345}),
        cpu_op("aten::mm", 200, 100, **{"Input Dims": [[64, 32], [32, 48]],
                                        "Input type": ["float", "float"]}),
        cpu_op("triton_poi_fused_add_0", 400, 10, **{
            "Input Dims": [[128], [128]], "Input type": ["float", "float"],
            "kernel_file": "/tmp/torchinductor_u/ab/cab.py", "kernel_backend": "triton"}),
    ]
    table = make_table(events, tmp_path)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    mm = rows[names == "aten::mm"]
    assert mm["flops"].tolist() == [12345, 2 * 64 * 32 * 48]
    assert mm["estimate"].tolist() == [False, True]
    kernel = rows[names == "triton_poi_fused_add_0"].iloc[0]
    assert kernel["bytes"] == 4 * 256 and np.isnan(kernel["flops"])  # all tensor arguments
    [row] = [r for r in build_roofline(table)["rows"] if r["name"] == "aten::mm"]
    assert row["flops"] == 12345 + 2 * 64 * 32 * 48 and row["estimate"] is True
    assert row["time_us"] == 200 and row["bound"] is None  # a CPU trace: no peaks


def test_roofline_keeps_failed_calls_only_where_nothing_known_replaces_them(tmp_path) -> None:
    """An outermost call whose estimate failed keeps its row (FLOPs null, with the reason)
    unless a known call lies under it (then that one counts) or encloses it."""
    mm = {"Input Dims": [[4, 5], [5, 6]], "Input type": ["float", "float"]}
    bad_linear = {"Input Dims": [[4, 5], [6, 5, 1], []], "Input type": ["float", "float", ""]}
    events = [
        cpu_op("ProfilerStep#1", 0, 1000),
        cpu_op("aten::linear", 10, 100, **bad_linear),  # fails, but its mm is known
        cpu_op("aten::mm", 20, 50, **mm),
        cpu_op("aten::mm", 200, 100, **mm),  # known, encloses a failed call
        cpu_op("aten::linear", 210, 50, **bad_linear),
        cpu_op("aten::linear", 400, 100, **bad_linear),  # fails, nothing known around it
    ]
    rows = {(r["name"], r["calls"]): r for r in build_roofline(make_table(events, tmp_path))
            ["rows"]}
    assert set(rows) == {("aten::mm", 2), ("aten::linear", 1)}
    assert rows[("aten::mm", 2)]["flops"] == 2 * (2 * 4 * 5 * 6)
    assert rows[("aten::mm", 2)]["flops_reason"] is None
    assert rows[("aten::linear", 1)]["flops"] is None
    assert rows[("aten::linear", 1)]["flops_reason"] == (
        "linear of [4, 5] with weight [6, 5, 1]: sizes differ")
