"""The shape-based FLOPs estimate against torch's own counter on a real CPU recording."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.flops import op_flops
from tb_plugin.load import load_trace
from tests.support import import_torch

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
