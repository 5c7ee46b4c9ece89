"""Page helpers shared by the browser tests (test modules never import each other): opening
the plugin's frame, selecting, waiting on what the page shows, reading tables, the UI's number
formats, and the dark theme's colours."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tests.support import need as support_need
from tests.support import need_shipped

from .harness import PLUGIN, TensorBoard

TIMEOUT_MS = 30_000


def plugin_frame(page: Any, tb: TensorBoard) -> Any:
    """Open TensorBoard on the plugin's tab and return the plugin's iframe."""
    page.goto(f"{tb.url}/#{PLUGIN}")
    deadline = time.time() + TIMEOUT_MS / 1000
    while time.time() < deadline:
        for frame in page.frames:
            if "plugin_entry.html" in frame.url and f"name={PLUGIN}" in frame.url:
                frame.wait_for_selector("[data-testid=run-select]", timeout=TIMEOUT_MS)
                return frame
        page.wait_for_timeout(200)
    frames = [f.url for f in page.frames]
    raise AssertionError(f"the {PLUGIN} iframe did not appear; frames: {frames}")


def open_entry(page: Any, tb: TensorBoard, fragment: str = "") -> Any:
    """Open the plugin's own document (what the iframe shows) directly, with a state hash."""
    page.goto(tb.entry + (f"#{fragment}" if fragment else ""))
    page.wait_for_selector("[data-testid=run-select]", timeout=TIMEOUT_MS)
    return page.main_frame


def select(frame: Any, testid: str, value: str) -> None:
    frame.select_option(f"[data-testid={testid}]", value)


def choose(frame: Any, run: str, worker: str | None = None, span: str | None = None) -> None:
    select(frame, "run-select", run)
    if worker is not None:
        frame.wait_for_selector(f"[data-testid=worker-select] option[value='{worker}']",
                                state="attached", timeout=TIMEOUT_MS)
        select(frame, "worker-select", worker)
    if span is not None and frame.locator("[data-testid=span-select]").count():
        select(frame, "span-select", span)


def open_tab(frame: Any, view: str) -> None:
    frame.click(f"[data-testid=tab-{view}]")


def wait_text(frame: Any, selector: str, expected: str) -> None:
    frame.wait_for_function(
        "([sel, text]) => { const el = document.querySelector(sel);"
        " return !!el && el.textContent.trim() === text }",
        arg=[selector, expected], timeout=TIMEOUT_MS,
    )


def table_column(frame: Any, table: str, column: str) -> list[str]:
    """Texts of one column over the rows currently rendered (top of the table)."""
    return frame.locator(
        f"[data-testid={table}] [data-testid=table-row] [data-col={column}]").all_inner_texts()


def wait_rows(frame: Any, table: str, count: int) -> None:
    frame.wait_for_selector(f"[data-testid={table}][data-rows='{count}']", timeout=TIMEOUT_MS)


def selection_of(tb: TensorBoard, run: str) -> dict[str, str]:
    worker = tb.api("workers", run=run, view="Overview")[0]
    span = tb.api("spans", run=run, worker=worker)[0]
    return {"run": run, "worker": worker, "span": span}


def shot(page: Any, artifacts: Path, name: str) -> None:
    page.wait_for_timeout(400)  # let the charts finish their entry animation
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def first_sample(tb: TensorBoard) -> str:
    need_shipped(bool(tb.runs["samples"]), "a sample run in samples/")
    return tb.runs["samples"][0]


def gpu_run(tb: TensorBoard) -> str:
    support_need("resnet50_gpu_pt19" in tb.runs["shared"], "../shared/traces/resnet50_gpu_pt19")
    return "resnet50_gpu_pt19"


# -- tests ---------------------------------------------------------------------------------


UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(value: float) -> str:
    """What the views show for a size (src/views/common/format.ts `bytes`)."""
    x = abs(value)
    if x < 1024:
        return f"{round(value):,} B"
    unit = 0
    while x >= 1024 and unit < len(UNITS) - 1:
        x /= 1024
        unit += 1
    return f"{'-' if value < 0 else ''}{x:,.2f} {UNITS[unit]}"


def fmt_us(value: float) -> str:
    """What the views show for a time in us: JavaScript's Math.round (halves up), grouped."""
    return f"{math.floor(value + 0.5):,}"


def fmt_duration(value: float) -> str:
    """What the views show for a time in us with a unit per magnitude (format.ts `duration`)."""
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:,.2f} s"
    if magnitude >= 1e3:
        return f"{value / 1e3:,.2f} ms"
    return f"{fmt_us(value)} us"


def fmt_signed_duration(value: float) -> str:
    return f"+{fmt_duration(value)}" if value > 0 else fmt_duration(value)


def view_selection(tb: TensorBoard, run: str, view: str) -> dict[str, str]:
    worker = tb.api("workers", run=run, view=view)[0]
    span = tb.api("spans", run=run, worker=worker)[0]
    return {"run": run, "worker": worker, "span": span}


def need(tb: TensorBoard, run: str) -> str:
    support_need(run in tb.runs["samples"] + tb.runs["shared"],
                 f"run {run} (samples/ or ../shared/traces)")
    return run


def open_view(page: Any, tb: TensorBoard, view: str, **state: str) -> Any:
    fragment = "&".join([f"view={view}", *(f"{k}={v}" for k, v in state.items())])
    return open_entry(page, tb, fragment)


def wait_request(page: Any, log: Any, match: Any) -> str:
    """The last request URL the page made that `match`es, waiting for one."""
    for _ in range(TIMEOUT_MS // 100):
        found = [u for u in log.urls if match(u)]
        if found:
            return found[-1]
        page.wait_for_timeout(100)
    raise AssertionError(f"no such request among {log.urls[-10:]}")


def device_rows(payload: dict[str, Any], table: str, device: str) -> list[dict[str, Any]]:
    return [r for r in payload[table]["rows"] if r["device"] == device]


# -- the bundle under test -------------------------------------------------------------------


# The dark theme's surface and text colours (styles.css :root[data-theme='dark']).
DARK_SURFACE = "rgb(41, 42, 45)"
DARK_TEXT = "rgb(232, 234, 237)"


def card_colours(frame: Any, selector: str) -> tuple[str, str]:
    """Computed background and text colour of the card holding `selector`."""
    return tuple(frame.eval_on_selector(selector, """el => {
        const s = getComputedStyle(el.closest('.card')); return [s.backgroundColor, s.color] }"""))


def assert_dark(frame: Any, selector: str) -> None:
    assert frame.evaluate("() => document.documentElement.dataset.theme") == "dark"
    assert card_colours(frame, selector) == (DARK_SURFACE, DARK_TEXT)
