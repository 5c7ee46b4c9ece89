"""The allocator snapshot in the Memory view, in chromium against a real TensorBoard: the card
on the trace's time axis with the numbers of the API (peak, segments, top allocations and their
stacks), a click on the curve showing the segments at that instant, the refused pickle's reason
on screen, the new leak/end wording, and light and dark screenshots."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlparse

from tests.support import need_shipped

from .pages import TIMEOUT_MS, fmt_bytes, open_view, select, shot, view_selection, wait_request


def _run(tb) -> str:
    need_shipped("snapshot_run" in tb.runs.get("snapshots", []), "samples/cnn_bs32")
    return "snapshot_run"


def test_snapshot_card_matches_the_api(page, views_tensorboard, requests_log, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, _run(tb), "Memory")
    payload = tb.api("memory/snapshot", **sel)
    assert payload["clock"] == "trace" and payload["name"].endswith(".snapshot.pickle")
    frame = open_view(page, tb, "Memory", **sel)
    card = "[data-testid=mem-snapshot-card]"
    frame.wait_for_selector(f"{card} [data-testid=mem-snapshot-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    subtitle = frame.inner_text("[data-testid=mem-snapshot-subtitle]")
    assert payload["name"] in subtitle and "on this trace’s time axis" in subtitle
    peak = frame.inner_text("[data-testid=mem-snapshot-peak]")
    assert fmt_bytes(payload["peak"]["bytes"]) in peak
    assert fmt_bytes(payload["peak"]["reserved_bytes"]) in peak
    segments = payload["segments"]
    assert frame.locator("[data-testid=mem-segment]").count() == len(segments["rows"])
    assert fmt_bytes(segments["largest_free_bytes"]) in frame.inner_text(
        "[data-testid=mem-segments]")
    top = payload["top_allocations"]
    rows = frame.locator("[data-testid=mem-top-row]")
    assert rows.count() == len(top)
    assert rows.nth(0).locator("td").nth(0).inner_text() == fmt_bytes(top[0]["size"])
    rows.nth(0).click()
    assert frame.locator("[data-testid=mem-stack] li").count() == len(top[0]["frames"])
    # the new wording: no reserved pool on the CPU, what is alive at the end is not a leak
    assert "no reserved pool on the CPU" in frame.inner_text("[data-testid=mem-peak-reserved-sub]")
    assert "not a leak by itself" in frame.inner_text("[data-testid=mem-end-sub]")
    assert frame.locator("[data-testid=mem-leak]").count() == 0
    shot(page, artifacts, "memory_snapshot_light")

    # a click on the curve asks for the segments at that instant
    chart = frame.locator("[data-testid=mem-snapshot-chart]")
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + box["height"] * 0.4)
    url = wait_request(page, requests_log, lambda u: "/memory/snapshot?" in u and "at=" in u)
    params = dict(parse_qsl(urlparse(url).query))
    at = tb.api("memory/snapshot", **params)["segments"]
    assert at["position"] != segments["position"]
    frame.wait_for_function(
        "n => document.querySelectorAll('[data-testid=mem-segment]').length === n",
        arg=len(at["rows"]), timeout=TIMEOUT_MS)
    assert fmt_bytes(at["allocated_bytes"]) in frame.inner_text("[data-testid=mem-segments]")

    # the malicious pickle of the same run: refused, with the reason, nothing else lost
    select(frame, "mem-snapshot-select", "evil.pickle")
    frame.wait_for_selector(f"{card} .banner", timeout=TIMEOUT_MS)
    text = frame.inner_text(card)
    assert "refused" in text and "nothing from the file was run" in text
    assert frame.locator("[data-testid=mem-curve] canvas").count() == 1  # the trace's curve


def test_snapshot_card_dark(dark_page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, _run(tb), "Memory")
    frame = open_view(dark_page, tb, "Memory", **sel)
    frame.wait_for_selector("[data-testid=mem-snapshot-chart][data-rendered=true]",
                            timeout=TIMEOUT_MS)
    assert dark_page.evaluate("document.documentElement.dataset.theme") == "dark"
    frame.locator("[data-testid=mem-snapshot-card]").scroll_into_view_if_needed()
    shot(dark_page, artifacts, "memory_snapshot_dark")
