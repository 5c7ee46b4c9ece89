"""The Roofline table shows, in the GFLOP cell, why a row's FLOPs are unknown: ns_resolution was
recorded without `record_shapes`, so its convolutions and matrix products cannot be sized; each of
their rows says so, in a real browser on a real TensorBoard."""

from __future__ import annotations

import pytest

from tests.support import needs_shared

from .pages import TIMEOUT_MS, open_view, view_selection

pytestmark = pytest.mark.browser


@needs_shared
def test_unknown_flops_show_their_reason(page, views_tensorboard):
    sel = view_selection(views_tensorboard, "ns_resolution", "Operator")
    rows = views_tensorboard.api("roofline", **sel)["rows"]
    unknown = [r for r in rows if r["flops_reason"]]
    assert {r["name"] for r in unknown} == {"aten::conv2d", "aten::convolution_backward",
                                            "aten::linear", "aten::mm"}
    assert all(r["flops"] is None for r in unknown) and len(unknown) == len(rows)
    frame = open_view(page, views_tensorboard, "Operator", **sel)
    frame.wait_for_selector("[data-testid=roofline-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    table_rows = frame.locator("[data-testid=roofline-row]")
    assert table_rows.count() == len(rows)
    notes = [table_rows.nth(i).locator("[data-testid=flops-reason]") for i in range(len(rows))]
    assert [(n.inner_text(), n.get_attribute("title")) for n in notes] == [
        (f"unknown: {r['flops_reason']}", r["flops_reason"]) for r in rows]
