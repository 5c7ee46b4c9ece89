"""The Roofline table shows, in the GFLOP cell, why a row's FLOPs are unknown: on the
PyTorch 1.9 ResNet-50 trace (no `Concrete Inputs`), the forward convolutions' stride is not
recorded; their rows say so, in a real browser on a real TensorBoard."""

from __future__ import annotations

import pytest

from tests.support import needs_shared

from .pages import TIMEOUT_MS, open_view, view_selection

pytestmark = pytest.mark.browser


@needs_shared
def test_unknown_flops_show_their_reason(page, views_tensorboard):
    sel = view_selection(views_tensorboard, "resnet50_gpu_pt19", "Operator")
    rows = views_tensorboard.api("roofline", **sel)["rows"]
    unknown = [r for r in rows if r["flops_reason"]]
    assert [r["name"] for r in unknown] == ["aten::conv2d"]
    assert unknown[0]["flops"] is None
    frame = open_view(page, views_tensorboard, "Operator", **sel)
    frame.wait_for_selector("[data-testid=roofline-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    notes = frame.locator("[data-testid=flops-reason]")
    assert notes.count() == 1
    assert notes.first.inner_text() == f"unknown: {unknown[0]['flops_reason']}"
    assert notes.first.get_attribute("title") == unknown[0]["flops_reason"]
    row = frame.locator("[data-testid=roofline-row]", has=notes.first)
    assert row.locator("td").first.inner_text().startswith("aten::conv2d")
