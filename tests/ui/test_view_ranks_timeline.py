"""All ranks on one timeline (the Distributed view's Timeline mode), in a real TensorBoard and
chromium on the real DDP and DLRM traces: a lane per rank with the API's offsets, the collective
links drawn by the trace painter, and an offset override that moves a lane."""

from __future__ import annotations

from typing import Any

import pytest

from .pages import TIMEOUT_MS, assert_dark, need, open_view, shot

ROOT = "[data-testid=ranks-canvas-root]"
# The canvas' pixels as a short fingerprint (changes when anything drawn changes).
PIXELS = """() => {
  const c = document.querySelector('[data-testid=ranks-canvas]');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let h = 0;
  for (let i = 0; i < d.length; i += 4) h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) | 0;
  return h;
}"""


def _open(page: Any, tb: Any, run: str) -> tuple[Any, str]:
    need(tb, run)
    span = tb.api("spans", run=run, worker=tb.api("workers", run=run, view="Distributed")[0])[0]
    page.add_init_script("window.__TORCH_PROF_DEBUG__ = true")
    frame = open_view(page, tb, "Distributed", run=run, span=span)
    frame.click("[data-testid=dist-ranks-toggle]", timeout=TIMEOUT_MS)
    frame.wait_for_selector(f"{ROOT}[data-state=ready]", timeout=TIMEOUT_MS)
    frame.wait_for_selector(f"{ROOT}:not([data-links=''])", timeout=TIMEOUT_MS)
    return frame, span


def _lanes(frame: Any) -> list[tuple[int, float]]:
    rows = frame.locator("[data-testid=ranks-lane]")
    return [(int(rows.nth(i).get_attribute("data-rank")),
             float(rows.nth(i).get_attribute("data-offset"))) for i in range(rows.count())]


def _wait_pixels(frame: Any, changed_from: int) -> int:
    frame.wait_for_function(f"h => ({PIXELS})() !== h", arg=changed_from, timeout=TIMEOUT_MS)
    return frame.evaluate(PIXELS)


@pytest.mark.parametrize("run, ranks", [("ddp_2ranks_sampled", 2),
                                        ("param_dlrm_8ranks_nccl", 8)])
def test_lanes_links_and_offset_override(page, views_tensorboard, artifacts, run, ranks):
    tb = views_tensorboard
    frame, span = _open(page, tb, run)
    api = tb.api("ranks", run=run, span=span)
    assert _lanes(frame) == [(lane["rank"], lane["offset_us"]) for lane in api["lanes"]]
    assert [rank for rank, _ in _lanes(frame)] == list(range(ranks))
    assert frame.get_attribute(ROOT, "data-links") == str(api["links"]["total"])
    assert api["links"]["total"] > 0
    # The links are drawn: turning them off changes the canvas, turning them on restores it.
    frame.wait_for_selector(f"{ROOT}[data-flows=on]", timeout=TIMEOUT_MS)
    with_links = frame.evaluate(PIXELS)
    frame.click("[data-testid=ranks-links]")
    frame.wait_for_selector(f"{ROOT}[data-flows=off]", timeout=TIMEOUT_MS)
    _wait_pixels(frame, with_links)
    frame.click("[data-testid=ranks-links]")
    frame.wait_for_function(f"h => ({PIXELS})() === h", arg=with_links, timeout=TIMEOUT_MS)
    shot(page, artifacts, f"ranks_timeline_{run}")
    # An override moves rank 1 by 1 ms: the lane's offset and the run's extent follow the API.
    moved = api["lanes"][1]["offset_us"] - 1000.0
    frame.fill("[data-testid=ranks-offset-1]", str(moved))
    frame.click("[data-testid=ranks-apply]")
    frame.wait_for_selector(f"[data-testid=ranks-lane][data-rank='1'][data-offset='{moved:g}']",
                            timeout=TIMEOUT_MS)
    frame.wait_for_selector(f"{ROOT}[data-state=ready]", timeout=TIMEOUT_MS)
    shifted = tb.api("ranks", run=run, span=span, offsets=f"1:{moved:g}")
    assert shifted["lanes"][1]["overridden"] and shifted["lanes"][1]["offset_us"] == moved
    assert float(frame.get_attribute(ROOT, "data-trace-start")) == shifted["trace_start_us"]
    assert float(frame.get_attribute(ROOT, "data-trace-end")) == pytest.approx(
        shifted["trace_end_us"] - shifted["trace_start_us"])
    assert (shifted["trace_start_us"], shifted["trace_end_us"]) != (
        api["trace_start_us"], api["trace_end_us"])


def test_ranks_timeline_dark(dark_page, views_tensorboard, artifacts):
    frame, _ = _open(dark_page, views_tensorboard, "ddp_2ranks_sampled")
    assert_dark(frame, "[data-testid=dist-ranks]")
    shot(dark_page, artifacts, "ranks_timeline_dark")


def test_fsdp_layers_card(page, views_tensorboard, artifacts):
    """The generated FSDP-like run (tests/support/fsdp_trace.py): the layer table shows the
    API's rows, hand-checked in tests/analysis/test_dist_fsdp.py."""
    tb = views_tensorboard
    run = "fsdp_generated"
    span = tb.api("spans", run=run, worker=tb.api("workers", run=run, view="Distributed")[0])[0]
    payload = tb.api("distributed", run=run, span=span)["fsdp_layers"]
    frame = open_view(page, tb, "Distributed", run=run, span=span)
    frame.wait_for_selector("[data-testid=dist-fsdp-table]", timeout=TIMEOUT_MS)
    rows = frame.locator("[data-testid=dist-fsdp-table] tbody tr")
    assert [(rows.nth(i).get_attribute("data-module"), rows.nth(i).get_attribute(
        "data-collective")) for i in range(rows.count())] == [
        ("Block_0", "all_gather"), ("Block_1", "all_gather"), ("layers.1", "reduce_scatter")]
    assert [rows.nth(i).locator("[data-col=overlap_share]").inner_text().strip()
            for i in range(rows.count())] == [
        f"{r['overlap_share'] * 100:.2f} %" for r in payload["rows"]]
    assert "2 all-gather / reduce-scatter calls" in frame.inner_text(
        "[data-testid=dist-fsdp-unattributed]")
    assert any(r.startswith("FSDP prefetch") for r in tb.api(
        "distributed", run=run, span=span)["recommendations"])
    frame.locator("[data-testid=dist-fsdp]").scroll_into_view_if_needed()
    shot(page, artifacts, "distributed_fsdp_layers")
