"""Issue 18, the rest, in a real TensorBoard in chromium: the Trace track list (pin, hide,
reorder, collapse, kept in the URL; the empty "(no pid)" lane left out), all-flows mode drawing a
flow with one end off screen clipped at the edge, a live switch to dark mode repainting the
canvas with no interaction, no /memory/timeline request for a span without that export, and
times with a unit per magnitude in Overview and Memory. Screenshots in light and dark.

Expected numbers come from the server's payloads and hand formulas (layout heights: a group
header is 24 px, a track max(1, depth) x 18 + 6 px, a counter 36 px), never from the page."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from .harness import TensorBoard
from .pages import (
    TIMEOUT_MS,
    fmt_duration,
    need,
    open_view,
    shot,
    view_selection,
    wait_request,
    wait_text,
)

DEBUG_PROBE = "window.__TORCH_PROF_DEBUG__ = true"  # the Trace engine's data-* state
ROOT = "[data-testid=trace-canvas-root]"
HEADER_H = 42  # layout.ts


def open_trace(page: Any, tb: TensorBoard, sel: dict[str, str], extra: str = "") -> None:
    page.add_init_script(DEBUG_PROBE)
    page.goto(f"{tb.entry}#run={sel['run']}&view=Trace&worker={sel['worker']}"
              f"&span={sel['span']}{extra}")
    page.wait_for_selector(f"{ROOT}[data-state=ready]", timeout=TIMEOUT_MS)


def attr(page: Any, name: str) -> str:
    return page.get_attribute(ROOT, f"data-{name}") or ""


def wait_height(page: Any, expected: int) -> None:
    page.wait_for_function(
        f"() => document.querySelector('{ROOT}').dataset.contentHeight === '{expected}'",
        timeout=TIMEOUT_MS)


def hash_params(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).fragment)


def track_h(t: dict[str, Any]) -> int:
    return max(1, t["depth"]) * 18 + 6


def laid_out(t: dict[str, Any]) -> bool:
    """What the UI lays out: tracks with events and a pid or a tid (trackList.ts)."""
    return t["event_count"] > 0 and not (t["pid"] == "" and t["tid"] == "")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_track_list_pin_hide_reorder_collapse_kept_in_the_url(theme, page, dark_page,
                                                               views_tensorboard, artifacts):
    tab = page if theme == "light" else dark_page
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Trace")
    payload = tb.api("timeline", **sel, width=1200)
    tracks = payload["tracks"]
    no_pid = [t for t in tracks if t["pid"] == "" and t["tid"] == ""]
    assert len(no_pid) == 1 and no_pid[0]["process"] == "(no pid)"  # Record Window End's lane
    shown = [t for t in tracks if laid_out(t)]
    groups = list(dict.fromkeys((t["kind"], t["process"]) for t in shown))
    counters = len(payload["counters"])
    h0 = (24 + 36 * counters if counters else 0) + 24 * len(groups) + sum(map(track_h, shown))
    open_trace(tab, tb, sel)
    wait_height(tab, h0)  # the "(no pid)" lane is not laid out

    tab.click("[data-testid=trace-tracks] summary")
    assert tab.inner_text("[data-testid=trace-tracks-note]") == "1 empty track not shown"
    # The python process: its first thread stays; hide the second, pin the third.
    python = [t for t in shown if t["process"] == groups[0][1]]
    assert len(python) >= 3
    main, hidden, pinned = python[0], python[1], python[2]
    row = f"[data-testid=trace-tracks] [data-track='{hidden['id']}']"
    tab.click(f"{row} [data-testid=trace-track-hide]")
    h1 = h0 - track_h(hidden)
    wait_height(tab, h1)
    assert hash_params(tab)["tr_hide"] == [str(hidden["id"])]
    assert tab.get_attribute(f"{row} [data-testid=trace-track-hide]", "aria-pressed") == "true"

    tab.click(f"[data-testid=trace-tracks] [data-track='{pinned['id']}'] "
              "[data-testid=trace-track-pin]")
    h2 = h1 + 24  # the track moves into a new "Pinned" group: one more header
    wait_height(tab, h2)
    assert hash_params(tab)["tr_pin"] == [str(pinned["id"])]

    # Move the last group up one place: the order lands in the URL, the height is unchanged.
    last = tab.locator("[data-testid=trace-tracks-group]").last
    last_key = last.get_attribute("data-group")
    last.locator("[data-testid=trace-tracks-up]").click()
    tab.wait_for_function("() => location.hash.includes('tr_order=')", timeout=TIMEOUT_MS)
    keys = tab.locator("[data-testid=trace-tracks-group]").evaluate_all(
        "els => els.map(e => e.dataset.group)")
    assert keys.index(last_key) == len(keys) - 2
    assert attr(tab, "content-height") == str(h2)

    # Collapse the python process from the menu: only its remaining thread's rows go.
    python_key = f"{groups[0][0]}:{groups[0][1]}"
    tab.uncheck(f"[data-testid=trace-tracks-group][data-group='{python_key}'] "
                "input[type=checkbox]")
    h3 = h2 - track_h(main)
    wait_height(tab, h3)
    # each list item is URI-encoded inside the field (a process name may hold a comma)
    assert attr(tab, "collapsed") == "1"
    assert [unquote(k) for k in hash_params(tab)["tr_fold"][0].split(",")] == [python_key]
    shot(tab, artifacts, f"ux_trace_tracks_{theme}")

    # A reload (or a shared link) shows the same arrangement.
    tab.reload()
    tab.wait_for_selector(f"{ROOT}[data-state=ready]", timeout=TIMEOUT_MS)
    wait_height(tab, h3)
    tab.click("[data-testid=trace-tracks] summary")
    assert tab.get_attribute(f"{row} [data-testid=trace-track-hide]", "aria-pressed") == "true"
    assert tab.locator("[data-testid=trace-tracks-group]").evaluate_all(
        "els => els.map(e => e.dataset.group)") == keys
    tab.click("[data-testid=trace-tracks-show-all]")
    tab.wait_for_function("() => !location.hash.includes('tr_hide=')", timeout=TIMEOUT_MS)
    tab.check(f"[data-testid=trace-tracks-group][data-group='{python_key}'] "
              "input[type=checkbox]")  # expanded again: its thread and the unhidden one
    wait_height(tab, h3 + track_h(main) + track_h(hidden))


def test_all_flows_draw_clipped_ends_at_the_edge(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Trace")
    payload = tb.api("timeline", **sel, width=1200)
    flows = payload["flows"]
    assert flows["total"] > 0 and not flows["capped"]
    shift = payload["origin_us"] - payload["trace_start_us"]  # window-relative -> trace time
    placed = {t["id"] for t in payload["tracks"] if laid_out(t)}
    page.set_viewport_size({"width": 1440, "height": 1700})  # every row on screen
    open_trace(page, tb, sel)
    height = page.evaluate(f"document.querySelector('{ROOT} canvas').clientHeight")
    assert HEADER_H + int(attr(page, "content-height")) < height
    page.check("[data-testid=trace-flows-toggle]")
    page.wait_for_selector(f"{ROOT}[data-flows=on]", timeout=TIMEOUT_MS)
    page.wait_for_function(f"() => document.querySelector('{ROOT}').dataset.clippedFlows === '0'",
                           timeout=TIMEOUT_MS)  # the whole trace: every end on screen
    # Zoom in on the middle third (keyboard W around the centre), until flows are cut.
    page.focus(ROOT)
    for _ in range(3):
        page.keyboard.press("w")
    page.wait_for_function(f"() => !document.querySelector('{ROOT}').dataset.loading",
                           timeout=TIMEOUT_MS)
    start, end = float(attr(page, "view-start")), float(attr(page, "view-end"))

    def on_screen(t: float) -> bool:
        return start <= t + shift <= end

    expected = sum(
        1 for i in range(len(flows["from_ts"]))
        if flows["from_track"][i] in placed and flows["to_track"][i] in placed
        and on_screen(flows["from_ts"][i]) != on_screen(flows["to_ts"][i]))
    assert expected > 0, "the zoomed window cuts no flow: pick another window"
    page.wait_for_function(
        f"() => document.querySelector('{ROOT}').dataset.clippedFlows === '{expected}'",
        timeout=TIMEOUT_MS)
    shot(page, artifacts, "ux_trace_clipped_flows_light")


def test_live_dark_switch_repaints_the_canvas(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Trace")
    page.set_viewport_size({"width": 1440, "height": 1700})  # empty background below the rows
    open_trace(page, tb, sel)
    pixel = f"""() => {{
        const c = document.querySelector('{ROOT} canvas');
        const p = c.getContext('2d').getImageData(c.width - 3, c.height - 3, 1, 1).data;
        return [p[0], p[1], p[2]];
    }}"""
    surface = """() => {
        const probe = document.createElement('canvas').getContext('2d');
        probe.fillStyle = getComputedStyle(document.documentElement)
          .getPropertyValue('--surface').trim();
        probe.fillRect(0, 0, 1, 1);
        const p = probe.getImageData(0, 0, 1, 1).data;
        return [p[0], p[1], p[2]];
    }"""
    light = page.evaluate(pixel)  # the background (or a step's light shade over it)
    assert page.evaluate(surface) == [255, 255, 255] and sum(light) > 3 * 240
    page.emulate_media(color_scheme="dark")  # the OS switches; nobody touches the page
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'",
                           timeout=TIMEOUT_MS)
    assert sum(page.evaluate(surface)) < 3 * 60
    # The canvas repaints by itself: the same pixel turns dark (the dark surface, or a step's
    # shade over it), with no pointer or key event in between.
    page.wait_for_function(f"() => ({pixel})().reduce((a, b) => a + b) < 3 * 70",
                           timeout=TIMEOUT_MS)
    shot(page, artifacts, "ux_trace_live_dark")


def test_no_memory_timeline_request_for_a_span_without_export(page, views_tensorboard,
                                                               requests_log):
    tb = views_tensorboard
    listing = {r["name"]: r for r in tb.api("runs")["runs"]}
    without = [(r, w["name"], s["span"]) for r in tb.runs["samples"]
               for w in listing[r]["workers"] for s in w["spans"]
               if "Memory" in listing[r]["views"] and s.get("memory_timeline") is False]
    with_export = [(r, w["name"], s["span"]) for r in tb.runs["samples"]
                   for w in listing[r]["workers"] for s in w["spans"]
                   if s.get("memory_timeline") is True]
    assert without and with_export
    run, worker, span = without[0]
    frame = open_view(page, tb, "Memory", run=run, worker=worker, span=span)
    frame.wait_for_selector("[data-testid=mem-stats], [data-testid=mem-empty]",
                            timeout=TIMEOUT_MS)
    assert [u for u in requests_log.urls if "/memory/timeline" in urlparse(u).path] == []
    # The control: a span with an export does ask (so the check above can fail).
    run, worker, span = with_export[0]
    frame = open_view(page, tb, "Memory", run=run, worker=worker, span=span)
    wait_request(page, requests_log, lambda u: urlparse(u).path.endswith("/memory/timeline"))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_times_read_with_a_unit_per_magnitude(theme, page, dark_page, views_tensorboard,
                                              artifacts):
    tab = page if theme == "light" else dark_page
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Overview")
    overview = tb.api("overview", **sel)
    frame = open_view(tab, tb, "Overview", **sel)
    wait_text(frame, "[data-testid=avg-step-time]", fmt_duration(overview["average"]["total_us"]))
    assert frame.inner_text("[data-testid=avg-step-time]").endswith(" ms")  # 10^3..10^6 us
    first = (overview["categories"] or list(overview["average"]["breakdown_us"]))[0]
    cell = frame.locator("[data-testid=breakdown-table] tbody tr td:nth-child(2)").first
    assert cell.inner_text() == fmt_duration(overview["average"]["breakdown_us"][first])
    shot(tab, artifacts, f"ux_overview_units_{theme}")

    memory = tb.api("memory", **sel)
    peak = memory["peaks"][memory["default_device"]]
    frame = open_view(tab, tb, "Memory", **sel)
    frame.wait_for_selector("[data-testid=mem-peak-sub]", timeout=TIMEOUT_MS)
    sub = frame.inner_text("[data-testid=mem-peak-sub]")
    assert sub.endswith(f" · at {fmt_duration(peak['t_us'] - memory['time_origin_us'])}")
    shot(tab, artifacts, f"ux_memory_units_{theme}")
