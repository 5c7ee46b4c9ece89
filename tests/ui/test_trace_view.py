"""The Trace view in a real TensorBoard, in chromium: the canvas draws, wheel/W zoom and drag/D
pan request new LOD windows, search with next/previous, a click shows the event's details and
args, flows toggle, the trace download, the Perfetto hand-off (with a stand-in window: nothing
leaves 127.0.0.1), and a generated ~300k-event trace (merged blocks, zooms, a debounced drag).

The engine's state (view window, loaded frame, request count) is read from the canvas root's
data-* attributes, which the engine writes only when the page sets the debug flag
(DEBUG_PROBE, an init script); `test_probe_is_off_by_default` checks that it is off otherwise.
Drawing speed is measured in bench/, not asserted here.

Run with this checkout first on PYTHONPATH (``PYTHONPATH=$PWD pytest tests/ui``) so TensorBoard
loads this tb_plugin; `test_served_bundle_is_this_checkout` fails otherwise.
"""

from __future__ import annotations

import gzip
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support import need, need_shipped

from .harness import REPO, SAMPLES, TensorBoard, running_tensorboard

TIMEOUT_MS = 30_000
GUTTER_W = 232  # layout.ts
HEADER_H = 42
BIG_EVENTS = 300_000
# Turns on the engine's debug probe (frontend/src/views/trace/debug.ts) in every frame of a page.
DEBUG_PROBE = "window.__TORCH_PROF_DEBUG__ = true"


# -- helpers -------------------------------------------------------------------------------


def sample_run(tb: TensorBoard) -> str:
    need_shipped(bool(tb.runs["samples"]), "a sample run in samples/")
    return tb.runs["samples"][0]


def selection_of(tb: TensorBoard, run: str) -> dict[str, str]:
    worker = tb.api("workers", run=run, view="Trace")[0]
    span = tb.api("spans", run=run, worker=worker)[0]
    return {"run": run, "worker": worker, "span": span}


def trace_url(tb: TensorBoard, sel: dict[str, str]) -> str:
    return f"{tb.entry}#run={sel['run']}&view=Trace&worker={sel['worker']}&span={sel['span']}"


def open_trace(page: Any, tb: TensorBoard, sel: dict[str, str], timeout: int = TIMEOUT_MS) -> Any:
    """The plugin's own document on the Trace view of `sel`, once the first frame is drawn."""
    page.add_init_script(DEBUG_PROBE)
    page.goto(trace_url(tb, sel))
    page.wait_for_selector("[data-testid=trace-canvas-root][data-state=ready]", timeout=timeout)
    wait_idle(page)
    return page


def root_attr(page: Any, name: str) -> str:
    return page.get_attribute("[data-testid=trace-canvas-root]", f"data-{name}") or ""


def view(page: Any) -> tuple[float, float]:
    return float(root_attr(page, "view-start")), float(root_attr(page, "view-end"))


def wait_idle(page: Any, timeout: int = TIMEOUT_MS) -> None:
    """No request pending or scheduled, no draw pending, and the loaded frame covers the view
    (the probe's data-loading, data-scheduled and data-draw-pending)."""
    page.wait_for_function(
        """() => {
          const r = document.querySelector('[data-testid=trace-canvas-root]');
          if (!r || r.dataset.state !== 'ready' || r.dataset.loading) return false;
          if (r.dataset.scheduled || r.dataset.drawPending) return false;
          const vs = +r.dataset.viewStart, ve = +r.dataset.viewEnd, end = +r.dataset.traceEnd;
          const eps = (ve - vs) * 1e-3;
          return +r.dataset.frameStart <= Math.max(vs, 0) + eps
            && +r.dataset.frameEnd >= Math.min(ve, end) - eps;
        }""",
        timeout=timeout,
    )


def canvas_box(page: Any) -> dict[str, float]:
    box = page.locator("[data-testid=trace-canvas]").bounding_box()
    assert box, "no canvas"
    return box


def time_at(page: Any, x: float) -> float:
    box = canvas_box(page)
    start, end = view(page)
    return start + (x - box["x"] - GUTTER_W) / (box["width"] - GUTTER_W) * (end - start)


def pixels(page: Any) -> dict[str, int]:
    """Pixels of the track area (right of the labels, below the ruler) that are not the
    background, and how many of them are saturated (event colors)."""
    return page.evaluate(
        """([gutter, header]) => {
          const c = document.querySelector('[data-testid=trace-canvas]');
          const ctx = c.getContext('2d');
          const dpr = c.width / c.clientWidth;
          const x0 = Math.ceil(gutter * dpr), y0 = Math.ceil(header * dpr);
          const w = c.width - x0, h = c.height - y0;
          const d = ctx.getImageData(x0, y0, w, h).data;
          const bg = getComputedStyle(document.documentElement)
            .getPropertyValue('--surface').trim();
          const probe = document.createElement('canvas').getContext('2d');
          probe.fillStyle = bg; probe.fillRect(0, 0, 1, 1);
          const b = probe.getImageData(0, 0, 1, 1).data;
          let other = 0, colored = 0;
          for (let i = 0; i < d.length; i += 4) {
            const r = d[i], g = d[i + 1], bl = d[i + 2];
            if (Math.abs(r - b[0]) + Math.abs(g - b[1]) + Math.abs(bl - b[2]) > 24) other++;
            if (Math.max(r, g, bl) - Math.min(r, g, bl) > 40) colored++;
          }
          return {total: w * h, other, colored};
        }""",
        [GUTTER_W, HEADER_H],
    )


def timeline_requests(urls: list[str]) -> list[dict[str, list[str]]]:
    return [parse_qs(urlparse(u).query) for u in urls if urlparse(u).path.endswith("/timeline")]


def wait_drawn(page: Any) -> None:
    """The draw that the last input or toggle requested is done (`data-draw-pending` clear)."""
    page.wait_for_selector("[data-testid=trace-canvas-root]:not([data-draw-pending='1'])",
                           state="attached")


def shot(page: Any, artifacts: Path, name: str, drawn_in: Any = None) -> None:
    """A screenshot of `page` once the canvas (in `drawn_in`, the plugin's frame, when the
    page is TensorBoard's own) has drawn what was asked."""
    wait_drawn(drawn_in or page)
    page.screenshot(path=str(artifacts / f"{name}.png"))


def wait_search_count(page: Any) -> str:
    page.wait_for_function(
        "() => /\\/\\s*[\\d,]+$|no match/.test("
        "document.querySelector('[data-testid=trace-search-count]').textContent.trim())",
        timeout=TIMEOUT_MS,
    )
    return page.inner_text("[data-testid=trace-search-count]").strip()


def wait_selected(page: Any, event_id: int) -> None:
    page.wait_for_selector(f"[data-testid=trace-canvas-root][data-selected='{event_id}']",
                           timeout=TIMEOUT_MS)
    page.wait_for_selector(f"[data-testid=trace-details][data-event-id='{event_id}']",
                           timeout=TIMEOUT_MS)


# -- tests on the sample runs ----------------------------------------------------------------


def test_served_bundle_is_this_checkout(tensorboard):
    status, body, _ = tensorboard.get("index.js")
    assert status == 200
    served = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
    ours = (REPO / "tb_plugin" / "static" / "index.js").read_bytes()
    assert served == ours, (
        "TensorBoard serves another tb_plugin's bundle: run the tests with "
        f"PYTHONPATH={REPO} so this checkout's plugin is loaded")
    assert "Trace" in tensorboard.api("views", run=sample_run(tensorboard))


def test_trace_tab_in_tensorboard_draws(page, tensorboard, artifacts):
    """Through TensorBoard's own page: the plugin iframe, the Trace tab, a drawn canvas, a zoom."""
    run = sample_run(tensorboard)
    page.add_init_script(DEBUG_PROBE)  # init scripts run in every frame, the plugin's iframe too
    page.goto(f"{tensorboard.url}/#torch_prof")
    frame = None
    deadline = time.time() + TIMEOUT_MS / 1000
    while frame is None and time.time() < deadline:
        frame = next((f for f in page.frames if "plugin_entry.html" in f.url), None)
        page.wait_for_timeout(200)
    assert frame is not None, "the plugin iframe did not appear"
    frame.wait_for_selector("[data-testid=run-select]", timeout=TIMEOUT_MS)
    frame.select_option("[data-testid=run-select]", run)
    frame.click("[data-testid=tab-Trace]", timeout=TIMEOUT_MS)
    frame.wait_for_selector("[data-testid=trace-canvas-root][data-state=ready]",
                            timeout=TIMEOUT_MS)
    wait_idle(frame)
    counts = pixels(frame)
    assert counts["colored"] > 2000, counts
    before = view(frame)
    box = frame.locator("[data-testid=trace-canvas]").bounding_box()
    page.mouse.move(box["x"] + GUTTER_W + 300, box["y"] + 250)
    page.mouse.wheel(0, -400)
    wait_idle(frame)
    after = view(frame)
    assert after[1] - after[0] < 0.7 * (before[1] - before[0])
    shot(page, artifacts, "trace_in_tensorboard", drawn_in=frame)


def test_probe_is_off_by_default(page, tensorboard):
    """Without the debug flag the engine draws but writes none of its state into the DOM."""
    sel = selection_of(tensorboard, sample_run(tensorboard))
    page.goto(trace_url(tensorboard, sel))
    page.wait_for_function(
        "() => /events loaded/.test(document.querySelector('[data-testid=trace-info]')"
        "?.textContent ?? '')", timeout=TIMEOUT_MS)
    assert pixels(page)["colored"] > 1000
    names = page.evaluate(
        "() => Object.keys(document.querySelector('[data-testid=trace-canvas-root]').dataset)")
    assert names == ["testid"]


def test_canvas_draws_tracks_steps_and_counters(page, tensorboard, artifacts, requests_log):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    whole = tensorboard.api("timeline", **sel, width=1000)
    open_trace(page, tensorboard, sel)
    counts = pixels(page)
    # Events are drawn: a good share of the track area is colored.
    assert counts["colored"] > 0.02 * counts["total"], counts
    assert counts["other"] > counts["colored"]
    # The first request is the whole trace at the canvas' track width.
    first = timeline_requests(requests_log.urls)[0]
    assert "start_us" not in first and "end_us" not in first
    box = canvas_box(page)
    assert abs(int(first["width"][0]) - (box["width"] - GUTTER_W)) <= 2
    start, end = view(page)
    assert start == pytest.approx(0, abs=1e-3)
    assert end == pytest.approx(whole["trace_end_us"] - whole["trace_start_us"], rel=1e-6)
    info = page.inner_text("[data-testid=trace-info]")
    assert f"{whole['stats']['events']:,} events" in info
    shot(page, artifacts, "trace_light")


def test_wheel_and_w_zoom_drag_and_d_pan(page, tensorboard, artifacts, requests_log):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    open_trace(page, tensorboard, sel)
    box = canvas_box(page)
    track_w = box["width"] - GUTTER_W

    # Wheel: zoom in around the pointer; the time under it stays put.
    x = box["x"] + GUTTER_W + 0.3 * track_w
    y = box["y"] + 220
    page.mouse.move(x, y)
    anchor = time_at(page, x)
    s0, e0 = view(page)
    n_requests = len(timeline_requests(requests_log.urls))
    page.mouse.wheel(0, -300)
    wait_idle(page)
    s1, e1 = view(page)
    assert e1 - s1 < 0.8 * (e0 - s0)
    assert time_at(page, x) == pytest.approx(anchor, abs=(e1 - s1) * 0.01)
    # ... and the new window was requested at the canvas width (with overscan).
    reqs = timeline_requests(requests_log.urls)
    assert len(reqs) > n_requests
    last = reqs[-1]
    start_us, end_us = float(last["start_us"][0]), float(last["end_us"][0])
    trace_start = float(root_attr(page, "trace-start"))
    assert start_us - trace_start <= s1 + 1e-3 and end_us - trace_start >= e1 - 1e-3
    px = (end_us - start_us) / int(last["width"][0])
    assert px == pytest.approx((e1 - s1) / track_w, rel=0.02)
    assert pixels(page)["colored"] > 1000

    # W: zoom in (around the pointer).
    page.focus("[data-testid=trace-canvas-root]")
    page.keyboard.press("w")
    wait_idle(page)
    s2, e2 = view(page)
    assert e2 - s2 < 0.9 * (e1 - s1)

    # Drag: pan by the dragged distance.
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 60, y, steps=3)
    page.mouse.move(x - 150, y, steps=3)
    page.mouse.up()
    wait_idle(page)
    s3, e3 = view(page)
    shift = 150 / track_w * (e2 - s2)
    assert s3 - s2 == pytest.approx(shift, rel=0.05)
    assert e3 - s3 == pytest.approx(e2 - s2, rel=1e-6)

    # D: pan right.
    page.keyboard.press("d")
    wait_idle(page)
    s4, e4 = view(page)
    assert s4 > s3 + 0.05 * (e3 - s3)
    assert e4 - s4 == pytest.approx(e3 - s3, rel=1e-6)

    # The wheel over the track names (or with Shift) scrolls the tracks, the time window stays.
    scroll_top = "() => document.querySelector('.trace-scroll').scrollTop"
    if int(root_attr(page, "content-height")) + HEADER_H > box["height"] + 40:
        page.mouse.move(box["x"] + 100, y)
        page.mouse.wheel(0, 120)
        page.wait_for_function(f"() => ({scroll_top})() > 0")
        assert view(page) == (s4, e4)
        page.keyboard.down("Shift")
        page.mouse.move(x, y)
        page.mouse.wheel(0, -120)
        page.keyboard.up("Shift")
        page.wait_for_function(f"() => ({scroll_top})() === 0")
        assert view(page) == (s4, e4)

    # S: zoom out; double-click: fit.
    page.keyboard.press("s")
    wait_idle(page)
    s5, e5 = view(page)
    assert e5 - s5 > 1.1 * (e4 - s4)
    shot(page, artifacts, "trace_zoomed")
    page.mouse.dblclick(box["x"] + GUTTER_W + 100, box["y"] + 200)
    wait_idle(page)
    assert view(page)[0] == pytest.approx(0, abs=1e-3)
    # Each settled view was fetched once (debounced), no request left 127.0.0.1 (fixture).
    assert len(timeline_requests(requests_log.urls)) <= 12


def test_search_next_previous_select_and_reveal(page, tensorboard, artifacts):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    query = "aten::conv2d"
    expected = tensorboard.api("timeline/search", **sel, q=query, limit=200)
    need_shipped(expected["total"] >= 2, f"two {query} events in {sel}")
    open_trace(page, tensorboard, sel)
    page.fill("[data-testid=trace-search]", query)
    assert wait_search_count(page) == f"– / {expected['total']:,}"
    trace_start = float(root_attr(page, "trace-start"))

    def check(match: dict[str, Any], position: int) -> None:
        wait_selected(page, match["id"])
        assert page.inner_text("[data-testid=trace-details-name]") == match["name"]
        assert page.inner_text("[data-testid=trace-search-count]").strip() == (
            f"{position} / {expected['total']:,}")
        wait_idle(page)
        start, end = view(page)
        t = match["ts"] - trace_start
        assert start <= t <= end

    page.click("[data-testid=trace-search-next]")
    check(expected["matches"][0], 1)
    page.click("[data-testid=trace-search-next]")
    check(expected["matches"][1], 2)
    page.click("[data-testid=trace-search-prev]")
    check(expected["matches"][0], 1)
    # Enter in the box goes to the next one too.
    page.press("[data-testid=trace-search]", "Enter")
    check(expected["matches"][1], 2)
    shot(page, artifacts, "trace_search")
    # A name that is nowhere.
    page.fill("[data-testid=trace-search]", "no_such_event_name_xyz")
    assert wait_search_count(page) == "no match"


def find_event_point(page: Any) -> tuple[float, float, str]:
    """A point on a drawn event wide enough to aim at (found on the canvas' pixels, confirmed
    by the hover tooltip), and the event's name."""
    candidates = page.evaluate(
        """([gutter, header]) => {
          const c = document.querySelector('[data-testid=trace-canvas]');
          const ctx = c.getContext('2d');
          const dpr = c.width / c.clientWidth;
          const d = ctx.getImageData(0, 0, c.width, c.height).data;
          const at = (x, y) => {
            const i = (Math.round(y * dpr) * c.width + Math.round(x * dpr)) * 4;
            return [d[i], d[i + 1], d[i + 2]];
          };
          const out = [];
          for (let y = header + 160; y < c.clientHeight - 6 && out.length < 60; y += 9) {
            for (let x = gutter + 12; x < c.clientWidth - 40 && out.length < 60; x += 23) {
              const [r, g, b] = at(x, y), [r2, g2, b2] = at(x + 30, y);
              if (Math.max(r, g, b) - Math.min(r, g, b) > 40 && r === r2 && g === g2 && b === b2)
                out.push([x, y]);
            }
          }
          return out;
        }""",
        [GUTTER_W, HEADER_H],
    )
    box = canvas_box(page)
    for x, y in candidates:
        page.mouse.move(box["x"] + x, box["y"] + y)
        tip = page.locator("[data-testid=trace-tooltip]")
        wait_drawn(page)
        if tip.is_visible() and "Duration" in tip.inner_text():
            title = page.inner_text("[data-testid=trace-tooltip] .trace-tip-title")
            return box["x"] + x, box["y"] + y, title
    raise AssertionError("no event found on the canvas to click")


def test_click_event_shows_details_with_args(page, tensorboard, artifacts):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    open_trace(page, tensorboard, sel)
    # Zoom in a little so events are wide enough to carry args (aten ops, not only python).
    x, y, name = find_event_point(page)
    page.mouse.click(x, y)
    page.wait_for_selector("[data-testid=trace-details][data-state=ok]", timeout=TIMEOUT_MS)
    event_id = int(root_attr(page, "selected"))
    assert page.get_attribute("[data-testid=trace-details]", "data-event-id") == str(event_id)
    assert page.inner_text("[data-testid=trace-details-name]") == name
    details = tensorboard.api("timeline/event", **sel, id=event_id)
    assert details["name"] == name
    # Every arg of the event is in the table.
    args = {k: v for group in details["args"].values() for k, v in group.items()}
    if args:
        table = page.inner_text("[data-testid=trace-args]")
        for key in args:
            assert key in table
    shot(page, artifacts, "trace_details")
    # An event with args: found by search (aten ops carry input dims in these samples).
    found = tensorboard.api("timeline/search", **sel, q="aten::", limit=50)["matches"]
    with_args = next((m for m in found if any(
        tensorboard.api("timeline/event", **sel, id=m["id"])["args"].get(g)
        for g in ("op_args", "device_args", "python_args"))), None)
    need_shipped(with_args is not None, "an aten:: event with args in the sample")
    page.fill("[data-testid=trace-search]", with_args["name"])
    wait_search_count(page)
    page.click("[data-testid=trace-search-next]")
    page.wait_for_selector("[data-testid=trace-details][data-state=ok]", timeout=TIMEOUT_MS)
    rows = page.locator("[data-testid=trace-args] tr")
    assert rows.count() >= 1
    # Esc clears the selection (the canvas has the focus after a click).
    page.mouse.click(x, y)
    page.keyboard.press("Escape")
    page.wait_for_selector("[data-testid=trace-canvas-root][data-selected='']")


def test_correlated_link_jumps_to_the_kernel(page, tensorboard, artifacts):
    """GPU trace: a kernel's launch is a link that selects and reveals the launch."""
    need("resnet50_gpu_pt19" in tensorboard.runs["shared"], "../shared/traces/resnet50_gpu_pt19")
    sel = selection_of(tensorboard, "resnet50_gpu_pt19")
    kernel = tensorboard.api("timeline/search", **sel, q="sgemm", limit=1)["matches"][0]
    details = tensorboard.api("timeline/event", **sel, id=kernel["id"])
    launch = details["correlated"][0]
    open_trace(page, tensorboard, sel)
    page.fill("[data-testid=trace-search]", "sgemm")
    wait_search_count(page)
    page.click("[data-testid=trace-search-next]")
    wait_selected(page, kernel["id"])
    page.check("[data-testid=trace-flows-toggle]")
    wait_idle(page)
    shot(page, artifacts, "trace_gpu_kernel_flows")
    page.click(f"[data-testid=trace-correlated] button:has-text('{launch['name']}')")
    wait_selected(page, launch["id"])
    start, end = view(page)
    t = launch["ts"] - float(root_attr(page, "trace-start"))
    assert start <= t <= end

    # More matches than one page (200): "next" past the last loaded match fetches the next page.
    every = tensorboard.api("timeline/search", **sel, q="sgemm", limit=1000)
    if every["total"] <= 200:
        return
    page.fill("[data-testid=trace-search]", "sgem")
    wait_search_count(page)
    page.fill("[data-testid=trace-search]", "sgemm")
    assert wait_search_count(page) == f"– / {every['total']:,}"
    page.click("[data-testid=trace-search-prev]")  # from nothing: the last loaded match
    wait_selected(page, every["matches"][199]["id"])
    page.click("[data-testid=trace-search-next]")
    wait_selected(page, every["matches"][200]["id"])
    assert page.inner_text("[data-testid=trace-search-count]").strip() == (
        f"201 / {every['total']:,}")


def test_flows_toggle_draws_arrows(page, tensorboard, artifacts):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    whole = tensorboard.api("timeline", **sel, width=1000)
    need_shipped(whole["flows"]["total"] > 0, "flows in the sample")
    open_trace(page, tensorboard, sel)
    assert root_attr(page, "flows") in ("", "off")
    before = pixels(page)
    page.check("[data-testid=trace-flows-toggle]")
    page.wait_for_selector("[data-testid=trace-canvas-root][data-flows=on]")
    wait_drawn(page)
    after = pixels(page)
    assert after["other"] != before["other"], "flow arrows changed nothing on the canvas"
    # One chip per flow category, each can be switched off.
    cats = whole["flows"]["cats"]
    for cat in cats:
        assert page.locator(f".trace-chip[data-cat='{cat}']").count() == 1
    shot(page, artifacts, "trace_flows")
    page.uncheck("[data-testid=trace-flows-toggle]")
    page.wait_for_selector("[data-testid=trace-canvas-root][data-flows=off]")
    wait_drawn(page)
    assert pixels(page)["other"] == before["other"]


def test_download_link(page, tensorboard):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    open_trace(page, tensorboard, sel)
    href = page.get_attribute("[data-testid=trace-download]", "href")
    assert href and urlparse(href).hostname == "127.0.0.1"
    with urllib.request.urlopen(href, timeout=60) as resp:
        assert resp.status == 200
        body = resp.read()
        disposition = resp.headers.get("Content-Disposition", "")
    assert "filename=" in disposition
    name = re.search(r'filename="([^"]+)"', disposition).group(1)
    on_disk = next(tensorboard.logdir.rglob(name))
    assert body == on_disk.read_bytes()
    # And through the browser: a download of the same bytes.
    with page.expect_download() as info:
        page.click("[data-testid=trace-download]")
    path = info.value.path()
    assert Path(path).read_bytes() == body


PERFETTO_STANDIN = """
(() => {
  // A stand-in for the ui.perfetto.dev tab: a real (same-origin, blank) window whose
  // postMessage records what it gets and answers PING with PONG "from" Perfetto's origin.
  window.__perfetto = {opened: [], messages: []};
  window.open = (url, target) => {
    window.__perfetto.opened.push([url, target]);
    const frame = document.createElement('iframe');
    frame.style.display = 'none';
    document.body.appendChild(frame);
    const win = frame.contentWindow;
    win.postMessage = (message, origin) => {
      window.__perfetto.messages.push({origin, ping: message === 'PING',
        perfetto: message && message.perfetto ? {
          title: message.perfetto.title, fileName: message.perfetto.fileName,
          size: message.perfetto.buffer.byteLength,
          head: new TextDecoder().decode(new Uint8Array(message.perfetto.buffer, 0, 40)),
        } : null});
      if (message === 'PING') setTimeout(() => window.dispatchEvent(new MessageEvent('message',
        {data: 'PONG', origin: 'https://ui.perfetto.dev', source: win})), 10);
    };
    return win;
  };
})();
"""


def test_open_in_perfetto_posts_the_unzipped_trace(page, tensorboard):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    page.add_init_script(PERFETTO_STANDIN)
    open_trace(page, tensorboard, sel)
    page.click("[data-testid=trace-perfetto]")
    page.wait_for_function(
        "() => window.__perfetto.messages.some((m) => m.perfetto)", timeout=TIMEOUT_MS)
    state = page.evaluate("() => window.__perfetto")
    assert state["opened"][0][0].startswith("https://ui.perfetto.dev")
    assert all(m["origin"] == "https://ui.perfetto.dev" for m in state["messages"])
    assert any(m["ping"] for m in state["messages"])
    sent = next(m["perfetto"] for m in state["messages"] if m["perfetto"])
    status, body, _ = tensorboard.get("trace/download", **sel)
    raw = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
    assert sent["size"] == len(raw)
    assert sent["head"].lstrip().startswith("{")
    assert not sent["fileName"].endswith(".gz")
    assert sel["worker"] in sent["title"]


def test_dark_theme(dark_page, tensorboard, artifacts):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    open_trace(dark_page, tensorboard, sel)
    counts = pixels(dark_page)
    assert counts["colored"] > 0.02 * counts["total"], counts
    bg = dark_page.evaluate(
        "() => getComputedStyle(document.documentElement).getPropertyValue('--surface').trim()")
    assert bg == "#292a2d"
    shot(dark_page, artifacts, "trace_dark")


def hover_scan(page: Any, x: float, ys: list[float], want: str) -> tuple[float, float] | None:
    """Moves the pointer over (x, y) for each y until the tooltip contains `want`."""
    box = canvas_box(page)
    tip = page.locator("[data-testid=trace-tooltip]")
    for y in ys:
        page.mouse.move(box["x"] + x, box["y"] + y)
        wait_drawn(page)
        if tip.is_visible() and want in tip.inner_text():
            return box["x"] + x, box["y"] + y
    return None


def test_process_header_collapses_and_expands(page, tensorboard, artifacts):
    sel = selection_of(tensorboard, sample_run(tensorboard))
    open_trace(page, tensorboard, sel)
    box = canvas_box(page)
    rows = [HEADER_H + 4 + 6 * i for i in range(int((box["height"] - HEADER_H) / 6))]
    spot = hover_scan(page, 100, rows, "click to collapse")
    assert spot, "no process header found"
    label = page.inner_text("[data-testid=trace-tooltip] .trace-tip-title")
    before = pixels(page)
    height = int(root_attr(page, "content-height"))
    page.mouse.click(*spot)
    page.wait_for_selector("[data-testid=trace-canvas-root][data-collapsed='1']")
    wait_drawn(page)
    assert page.locator("[data-testid=trace-tooltip]").inner_text().endswith("click to expand")
    assert page.inner_text("[data-testid=trace-tooltip] .trace-tip-title") == label
    assert int(root_attr(page, "content-height")) < height
    assert pixels(page)["other"] != before["other"]
    shot(page, artifacts, "trace_collapsed")
    page.mouse.click(*spot)
    page.wait_for_selector("[data-testid=trace-canvas-root][data-collapsed='0']")
    wait_drawn(page)
    assert int(root_attr(page, "content-height")) == height
    assert pixels(page)["other"] == before["other"]


def test_device_pixel_ratio(browser, tensorboard, requests_log):
    """On a 2x screen the canvas has twice the pixels of its CSS size (sharp text and lines)."""
    sel = selection_of(tensorboard, sample_run(tensorboard))
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=2)
    try:
        page = context.new_page()
        page.on("request", requests_log.record)
        open_trace(page, tensorboard, sel)
        size = page.evaluate(
            "() => { const c = document.querySelector('[data-testid=trace-canvas]');"
            " return [c.width, c.height, c.clientWidth, c.clientHeight] }")
        assert size[0] == 2 * size[2] and size[1] == 2 * size[3]
        assert pixels(page)["colored"] > 1000
    finally:
        context.close()
    assert not requests_log.outside()


# -- a large generated trace -------------------------------------------------------------------


def write_big_trace(path: Path, target_events: int) -> int:
    """A sample's events replicated with shifted times (and ids) until ~target_events complete
    ("X") events, the ones the timeline draws; returns how many there are."""
    source = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
    need_shipped(bool(source), "samples/cnn_bs32")
    with gzip.open(source[0], "rt") as handle:
        trace = json.load(handle)
    events = trace["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    meta = [e for e in events if e.get("ph") == "M"]
    t0 = min(float(e["ts"]) for e in timed)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in timed)
    period = (t1 - t0) + 1000.0
    slices = sum(1 for e in timed if e.get("ph") == "X")
    copies = max(1, -(-target_events // slices))
    out: list[Any] = list(meta)
    for k in range(copies):
        shift = k * period
        for e in timed:
            c = dict(e)
            c["ts"] = float(e["ts"]) + shift
            if "id" in c and c.get("ph") in ("s", "f", "t"):
                c["id"] = f"{c['id']}-{k}"
            if isinstance(c.get("name"), str) and c["name"].startswith("ProfilerStep#"):
                c["name"] = f"ProfilerStep#{k * 100 + int(c['name'][13:] or 0)}"
            args = c.get("args")
            if isinstance(args, dict) and ("External id" in args or "correlation" in args):
                args = dict(args)
                for key in ("External id", "correlation"):
                    if isinstance(args.get(key), int):
                        args[key] += k * 10_000_000
                c["args"] = args
            out.append(c)
    trace["traceEvents"] = out
    with gzip.open(path, "wt", compresslevel=1) as handle:
        json.dump(trace, handle, separators=(",", ":"))
    return copies * slices


@pytest.fixture(scope="module")
def big_tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    root = tmp_path_factory.mktemp("trace_big")
    logdir = root / "logs"
    (logdir / "big").mkdir(parents=True)
    count = write_big_trace(logdir / "big" / "big_worker.1700000000000.pt.trace.json.gz",
                            BIG_EVENTS)
    runs = {"samples": ["big"], "shared": [], "events": count}
    with running_tensorboard(root, logdir, runs) as tb:
        yield tb


def test_large_trace_draws_zooms_and_pans(page, big_tensorboard, artifacts, requests_log):
    tb = big_tensorboard
    sel = selection_of(tb, "big")
    started = time.time()
    open_trace(page, tb, sel, timeout=180_000)
    first_frame_s = time.time() - started
    whole = tb.api("timeline", **sel, width=1000)
    assert whole["stats"]["events"] >= BIG_EVENTS
    counts = pixels(page)
    assert counts["other"] > 0.02 * counts["total"], counts
    shot(page, artifacts, "trace_large_fit")
    # Merged blocks say how many events they hold.
    box = canvas_box(page)
    spot = hover_scan(page, GUTTER_W + 0.37 * (box["width"] - GUTTER_W),
                      [HEADER_H + 4 + 5 * i for i in range(int((box["height"] - HEADER_H) / 5))],
                      "Too small to draw")
    assert spot, "no merged block found at the whole-trace zoom"
    assert re.fullmatch(r"[\d,]+ events",
                        page.inner_text("[data-testid=trace-tooltip] .trace-tip-title"))

    box = canvas_box(page)
    x = box["x"] + GUTTER_W + 0.5 * (box["width"] - GUTTER_W)
    y = box["y"] + 200
    page.mouse.move(x, y)
    # Quick zooms: stale requests are aborted or dropped; the last view wins.
    latencies = []
    for _ in range(6):
        page.mouse.wheel(0, -400)
        # The previous frame is drawn at the new scale at once (no blank canvas while loading).
        page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r()))")
        assert pixels(page)["other"] > 0
        t = time.time()
        wait_idle(page)
        latencies.append(time.time() - t)
    s, e = view(page)
    assert e - s < 0.01 * (whole["end_us"] - whole["start_us"])
    assert float(root_attr(page, "frame-start")) <= s + 1e-3
    assert float(root_attr(page, "frame-end")) >= e - 1e-3
    shot(page, artifacts, "trace_large_zoomed")

    # Pan by dragging, one pointer move per animation frame: each move redraws from the loaded
    # frame; no request until the pointer rests (debounced). 90 moves of 5 px pan by 450 px.
    n_before = len(timeline_requests(requests_log.urls))
    draws_before = int(root_attr(page, "draws"))
    track_w = box["width"] - GUTTER_W
    fps = page.evaluate(
        """([x, y]) => new Promise((resolve) => {
          const c = document.querySelector('[data-testid=trace-canvas]');
          const fire = (type, cx) => c.dispatchEvent(new PointerEvent(type, {bubbles: true,
            clientX: cx, clientY: y, pointerId: 7, button: 0, buttons: 1, isPrimary: true}));
          fire('pointerdown', x);
          let i = 0; const stamps = [];
          const step = (t) => {
            stamps.push(t);
            if (++i > 90) { fire('pointerup', x - i * 5); resolve(
              (stamps.length - 1) * 1000 / (stamps[stamps.length - 1] - stamps[0])); return; }
            fire('pointermove', x - i * 5);
            requestAnimationFrame(step);
          };
          requestAnimationFrame(step);
        })""",
        [x, y],
    )
    wait_idle(page)
    s2, e2 = view(page)
    assert s2 - s == pytest.approx(450 / track_w * (e - s), rel=0.02)
    assert e2 - s2 == pytest.approx(e - s, rel=1e-6)
    n_after = len(timeline_requests(requests_log.urls))
    assert n_after - n_before <= 2, "requests were not debounced during the drag"
    # Figures only (no threshold: speed on a shared machine is bench/'s business).
    draws = int(root_attr(page, "draws")) - draws_before
    avg_ms, max_ms = (float(v) for v in root_attr(page, "draw-ms").split("/"))
    print(f"\nlarge trace: {whole['stats']['events']:,} events, first frame {first_frame_s:.1f} s,"
          f" zoom settle p50 {sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms,"
          f" max {max(latencies) * 1000:.0f} ms; drag at {fps:.0f} fps ({draws} draws),"
          f" draw avg {avg_ms:.2f} ms,"
          f" max {max_ms:.2f} ms")
    shot(page, artifacts, "trace_large_panned")
