"""The shape-based FLOPs estimate against torch's own counter on a real CPU recording."""

from __future__ import annotations

import runpy
from typing import Any

import pytest

from tb_plugin.analysis.efficiency.flops import op_flops
from tb_plugin.load import load_trace
from tests.support import REPO, import_torch

pytestmark = pytest.mark.e2e


def test_cpu_recording_with_flops_agrees_with_the_estimate(tmp_path) -> None:
    """torch's own counter (`key_averages()` with `with_flops=True`) is the oracle: our
    estimate from the exported shapes agrees within 1% for mm, addmm, bmm and conv2d."""
    torch = import_torch()
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 (torch is optional)

    a, b, x, w = torch.randn(64, 32), torch.randn(32, 48), torch.randn(2, 3, 17, 17), \
        torch.randn(8, 3, 3, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        torch.mm(a, b)
        torch.addmm(torch.randn(48), a, b)
        torch.bmm(torch.randn(4, 8, 16), torch.randn(4, 16, 5))
        torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    oracle = {e.key: e.flops for e in prof.key_averages() if e.flops}
    path = tmp_path / "w.pt.trace.json"
    prof.export_chrome_trace(str(path))
    table = load_trace(str(path), use_cache=False)
    rows = op_flops(table)
    names = table.events["name"].to_numpy()[rows["event"].to_numpy()]
    for op in ("aten::mm", "aten::addmm", "aten::bmm", "aten::conv2d"):
        ours = float(rows["flops"][names == op].sum())
        assert ours == pytest.approx(oracle[op], rel=0.01), op


def _recorded(torch, tmp_path, run) -> tuple[Any, Any]:
    """Record `run` with shapes on CPU, export, load: (op_flops rows, their op names)."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415 (torch is optional)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run()
    path = tmp_path / "w.pt.trace.json"
    prof.export_chrome_trace(str(path))
    table = load_trace(str(path), use_cache=False)
    rows = op_flops(table)
    return rows, table.events["name"].to_numpy()[rows["event"].to_numpy()]


def _counted(run) -> float:
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415 (torch is optional)

    with FlopCounterMode(display=False) as mode:
        run()
    return float(mode.get_total_flops())


@pytest.mark.parametrize("case", ["linear", "matmul_vector_matrix", "matmul_vector_batch",
                                  "conv_transpose2d", "convolution_backward"])
def test_flop_counter_mode_is_the_oracle(tmp_path, case) -> None:
    """torch's `FlopCounterMode` counts the same computation; our estimate from the exported
    trace of it must agree exactly, per outermost op."""
    torch = import_torch()
    functional = torch.nn.functional
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    w = torch.randn(5, 4, 3, 3, requires_grad=True)
    wt = torch.randn(4, 3, 3, 3)
    y = functional.conv2d(x, w, stride=2, padding=1, dilation=1)
    runs = {
        "linear": ("aten::linear", lambda: functional.linear(
            torch.randn(3, 4, 6), torch.randn(5, 6), torch.randn(5))),
        "matmul_vector_matrix": ("aten::matmul", lambda: torch.matmul(
            torch.randn(7), torch.randn(7, 3))),
        "matmul_vector_batch": ("aten::matmul", lambda: torch.matmul(
            torch.randn(7), torch.randn(2, 7, 3))),
        "conv_transpose2d": ("aten::conv_transpose2d", lambda: functional.conv_transpose2d(
            x.detach(), wt, stride=2, padding=1, output_padding=1, groups=1)),
        "convolution_backward": ("aten::convolution_backward",
                                 lambda: y.sum().backward(retain_graph=True)),
    }
    op, run = runs[case]
    expected = _counted(run)
    rows, names = _recorded(torch, tmp_path, run)
    assert expected > 0
    assert float(rows["flops"][names == op].sum()) == expected


def test_sdpa_forward_and_backward_follow_torch_formulas(tmp_path) -> None:
    """CPU SDPA runs the fused `_scaled_dot_product_flash_attention_for_cpu` (+ `_backward`);
    torch's own formulas for fused attention (`sdpa_flop_count`, `sdpa_backward_flop_count`:
    the backward recomputes the scores, 2.5x the forward when D = Dv) are the oracle, applied to
    the tensors' real shapes (Lk != Lq; torch takes the math path, not the fused kernel, when
    Dv != D, so the property test covers Dv != D)."""
    torch = import_torch()
    from torch.utils import flop_counter  # noqa: PLC0415 (torch is optional)

    q = torch.randn(2, 3, 10, 8, requires_grad=True)
    k = torch.randn(2, 3, 12, 8, requires_grad=True)
    v = torch.randn(2, 3, 12, 8, requires_grad=True)

    def run() -> None:
        torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()

    rows, names = _recorded(torch, tmp_path, run)
    forward = flop_counter.sdpa_flop_count(q.shape, k.shape, v.shape)
    backward = flop_counter.sdpa_backward_flop_count([2, 3, 10, 8], q.shape, k.shape, v.shape)
    fused = "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert rows["flops"][names == fused].tolist() == [forward]
    assert rows["flops"][names == fused + "_backward"].tolist() == [backward]
    assert backward == 2.5 * forward
    assert rows["flops"][names == "aten::scaled_dot_product_attention"].tolist() == [forward]


def test_op_schemas_table_is_torchs() -> None:
    """The argument layouts the package holds are what the generator derives from the
    installed torch's schemas (plus the PyTorch 1.x ones it keeps): regenerate with
    `python bench/gen_op_schemas.py` when this fails."""
    import_torch()
    generator = runpy.run_path(str(REPO / "bench" / "gen_op_schemas.py"))
    held = (REPO / "tb_plugin" / "analysis" / "efficiency" / "op_schemas.py").read_text()
    assert generator["render"]().split('"""', 2)[2] == held.split('"""', 2)[2]
