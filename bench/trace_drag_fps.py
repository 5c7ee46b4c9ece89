"""Drag-pan speed of the Trace view on a generated ~300k-event trace, in Debian chromium.

    PYTHONPATH=$PWD .venv/bin/python bench/trace_drag_fps.py [--events 300000] [--runs 3]

Starts a real TensorBoard on the trace that tests/ui/test_trace_view.py generates, opens the
Trace view with the engine's debug probe on (frontend/src/views/trace/debug.ts), zooms in six
wheel steps like the test, then drags with one pointer move per animation frame (90 moves of
5 px) and prints the frame rate of the moves, the number of draws, and the engine's draw() time
(avg/max over its last 120 draws, ms, from the probe's data-draw-ms). Reports only: nothing is
asserted, the figures depend on the machine; the test checks the behaviour (the drag pans by the
dragged distance, no request until the pointer rests).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.ui.harness import CHROMIUM, CHROMIUM_ARGS, RequestLog, new_page, running_tensorboard
from tests.ui.test_trace_view import (
    DEBUG_PROBE,
    GUTTER_W,
    selection_of,
    trace_url,
    wait_idle,
    write_big_trace,
)

DRAG = """([x, y]) => new Promise((resolve) => {
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
})"""


def probe(page, name: str) -> str:
    return page.get_attribute("[data-testid=trace-canvas-root]", f"data-{name}") or ""


def measure(page, url: str) -> tuple[float, int, str]:
    """One run: open, zoom in, drag; (moves per second, draws during the drag, draw avg/max)."""
    page.goto(url)
    page.wait_for_selector("[data-testid=trace-canvas-root][data-state=ready]", timeout=180_000)
    wait_idle(page)
    box = page.locator("[data-testid=trace-canvas]").bounding_box()
    x = box["x"] + GUTTER_W + 0.5 * (box["width"] - GUTTER_W)
    y = box["y"] + 200
    page.mouse.move(x, y)
    for _ in range(6):
        page.mouse.wheel(0, -400)
        wait_idle(page)
    draws = int(probe(page, "draws"))
    fps = page.evaluate(DRAG, [x, y])
    wait_idle(page)
    return fps, int(probe(page, "draws")) - draws, probe(page, "draw-ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trace_fps_") as tmp:
        root = Path(tmp)
        logdir = root / "logs"
        (logdir / "big").mkdir(parents=True)
        count = write_big_trace(logdir / "big" / "big_worker.1700000000000.pt.trace.json.gz",
                                args.events)
        with running_tensorboard(root, logdir, {"samples": ["big"], "shared": []}) as tb, \
                sync_playwright() as pw:
            url = trace_url(tb, selection_of(tb, "big"))
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context, page, _ = new_page(browser, "light", RequestLog())
            page.add_init_script(DEBUG_PROBE)
            print(f"trace: {count:,} events")
            for run in range(args.runs):
                fps, draws, draw_ms = measure(page, url)
                print(f"run {run + 1}: drag at {fps:.0f} moves/s, {draws} draws,"
                      f" draw() avg/max {draw_ms} ms")
            context.close()
            browser.close()


if __name__ == "__main__":
    main()
