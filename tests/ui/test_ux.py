"""What new users tripped over (issue 18), in a real TensorBoard in chromium: the Diff page on
one basis (its headline is the sum of its children, per step and whole span), the flows of the
selected event drawn without the Flows toggle, the range aggregate of a Shift+drag, full
Operator tables with a caption that counts matches, and the banner shown when the old
torch-tb-profiler is installed. Screenshots in light and dark."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support import REPO, SAMPLES, launcher

from .harness import TensorBoard, wait_ready
from .pages import (
    TIMEOUT_MS,
    fmt_duration,
    need,
    open_view,
    plugin_frame,
    shot,
    view_selection,
    wait_request,
    wait_rows,
    wait_text,
)

DEBUG_PROBE = "window.__TORCH_PROF_DEBUG__ = true"  # the Trace engine's data-* state
GUTTER_W, HEADER_H = 232, 42  # frontend/src/views/trace/layout.ts


def diff_pair(tb: TensorBoard) -> tuple[dict[str, str], dict[str, str]]:
    base = view_selection(tb, need(tb, "cnn_bs32"), "Diff")
    exp = view_selection(tb, need(tb, "cnn_bs64"), "Diff")
    return base, {"exp_run": exp["run"], "exp_worker": exp["worker"], "exp_span": exp["span"]}


def child_sum(frame: Any, col: str) -> float:
    return sum(float(v) for v in frame.locator(
        f"[data-testid=diff-child] [data-col={col}]").evaluate_all(
        "cells => cells.map(c => c.dataset.us)"))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_diff_headline_is_the_sum_of_its_children(theme, page, dark_page, views_tensorboard,
                                                  artifacts):
    tab = page if theme == "light" else dark_page
    tb = views_tensorboard
    base, exp = diff_pair(tb)
    frame = open_view(tab, tb, "Diff", **base, **exp)
    for basis, words in (("per_step", "per step"), ("total", "over the whole span")):
        root = tb.api("diff", **base, **exp, basis=basis)
        assert root["basis"] == basis
        key = "host_duration_us"  # CPU samples: host time is what the page shows
        wait_text(frame, "[data-testid=diff-base-total]", fmt_duration(root["left"][key]))
        wait_text(frame, "[data-testid=diff-exp-total]", fmt_duration(root["right"][key]))
        tolerance = 1e-3 * len(root["children"])
        assert abs(child_sum(frame, "base") - root["left"][key]) <= tolerance
        assert abs(child_sum(frame, "exp") - root["right"][key]) <= tolerance
        subtitle = frame.inner_text("[data-testid=diff-basis-words]")
        assert words in subtitle and "sum of the children below" in subtitle
        shot(tab, artifacts, f"ux_diff_{basis}_{theme}")
        if basis == "per_step":
            frame.click("[data-testid=diff-basis] [data-value=total]")
            tab.wait_for_function("() => location.hash.includes('diff_basis=total')")
    # The kernel diff table (CPU samples: none) and the device/host switch are there.
    frame.click("[data-testid=diff-table-switch] [data-value=kernels]")
    frame.wait_for_selector("[data-testid=diff-kernels-card]", timeout=TIMEOUT_MS)
    wait_text(frame, "[data-testid=diff-kernels-card] .banner-title",
              "No GPU kernels in either trace")


def test_diff_kernel_table_on_a_gpu_trace(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    run = need(tb, "resnet50_gpu_pt19")
    worker = tb.api("workers", run=run, view="Diff")[0]
    spans = tb.api("spans", run=run, worker=worker)
    pair = {"run": run, "worker": worker, "span": spans[0], "exp_run": run,
            "exp_worker": worker, "exp_span": spans[1]}
    frame = open_view(page, tb, "Diff", **pair, diff_table="kernels")
    kernels = tb.api("diff/kernels", **pair)
    wait_rows(frame, "diff-kernels", len(kernels["rows"]))
    first = frame.locator("[data-testid=diff-kernels] [data-testid=table-row] [data-col=name]")
    assert first.first.inner_text() == kernels["rows"][0]["name"]
    shot(page, artifacts, "ux_diff_kernels_light")


def open_trace(page: Any, tb: TensorBoard, sel: dict[str, str]) -> None:
    page.add_init_script(DEBUG_PROBE)
    page.goto(f"{tb.entry}#run={sel['run']}&view=Trace&worker={sel['worker']}&span={sel['span']}")
    page.wait_for_selector("[data-testid=trace-canvas-root][data-state=ready]",
                           timeout=TIMEOUT_MS)


def test_flows_of_the_selected_event_without_the_toggle(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Trace")
    flows = tb.api("timeline", **sel, width=1200)["flows"]
    assert flows["total"] > 0
    target = flows["to_id"][0]
    name = tb.api("timeline/event", **sel, id=target)["name"]
    open_trace(page, tb, sel)
    assert page.get_attribute("[data-testid=trace-canvas-root]", "data-flows") == "off"
    page.fill("[data-testid=trace-search]", name)
    total = tb.api("timeline/search", **sel, q=name)["total"]
    wait_text(page, "[data-testid=trace-search-count]", f"– / {total}")  # results arrived
    for _ in range(total):
        page.press("[data-testid=trace-search]", "Enter")
        page.wait_for_function("() => document.querySelector("
                               "'[data-testid=trace-canvas-root]').dataset.selected !== ''",
                               timeout=TIMEOUT_MS)
        if page.get_attribute("[data-testid=trace-canvas-root]", "data-selected") == str(target):
            break
    page.wait_for_selector(f"[data-testid=trace-canvas-root][data-selected='{target}']",
                           timeout=TIMEOUT_MS)
    ends = [i for i in range(len(flows["to_id"])) if target in (flows["to_id"][i],
                                                                flows["from_id"][i])]
    page.wait_for_function(
        f"() => Number(document.querySelector('[data-testid=trace-canvas-root]')"
        f".dataset.selectedFlows) >= {len(ends)}", timeout=TIMEOUT_MS)
    assert page.get_attribute("[data-testid=trace-canvas-root]", "data-flows") == "off"
    shot(page, artifacts, "ux_trace_selected_flows_light")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_range_aggregate_of_a_shift_drag(theme, page, dark_page, views_tensorboard, requests_log,
                                         artifacts):
    tab = page if theme == "light" else dark_page
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Trace")
    open_trace(tab, tb, sel)
    box = tab.locator("[data-testid=trace-canvas]").bounding_box()
    x0, y0 = box["x"] + GUTTER_W + 150, box["y"] + HEADER_H + 30
    tab.keyboard.down("Shift")
    tab.mouse.move(x0, y0)
    tab.mouse.down()
    tab.mouse.move(x0 + 200, y0 + 120, steps=8)
    tab.mouse.up()
    tab.keyboard.up("Shift")
    tab.wait_for_selector("[data-testid=trace-range]", timeout=TIMEOUT_MS)
    url = wait_request(tab, requests_log, lambda u: "/timeline/range?" in u)
    query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
    payload = tb.api("timeline/range", **query)
    assert payload["rows"] and payload["events"] == sum(r["count"] for r in payload["rows"])
    wait_rows(tab, "trace-range-table", len(payload["rows"]))
    names = tab.locator("[data-testid=trace-range-table] [data-testid=table-row] [data-col=name]")
    assert names.first.inner_text() == payload["rows"][0]["name"]  # by total time
    csv = tab.get_attribute("[data-testid=trace-range-csv]", "href")
    assert "format=csv" in csv and "timeline/range" in csv
    shot(tab, artifacts, f"ux_trace_range_{theme}")
    tab.click("[data-testid=trace-range-close]")
    assert tab.locator("[data-testid=trace-range]").count() == 0


def test_operator_table_shows_every_row_and_counts_matches(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Operator")
    rows = tb.api("operators", **sel)["rows"]
    frame = open_view(page, tb, "Operator", **sel)
    wait_rows(frame, "op-table", len(rows))
    wait_text(frame, "[data-testid=op-count]", f"{len(rows)} operators · CPU-only trace")
    frame.fill("[data-testid=op-search]", "conv")
    matching = [r for r in rows if "conv" in r["name"].lower()]
    wait_rows(frame, "op-table", len(matching))
    wait_text(frame, "[data-testid=op-count]",
              f"{len(matching)} of {len(rows)} operators match “conv” · CPU-only trace")
    tip = frame.get_attribute("[data-testid=op-table] [role=columnheader][data-col=host_self_us]",
                              "title")
    assert tip.startswith("Host self time: ") and "CPU time" in tip
    shot(page, artifacts, "ux_operator_table_light")


# -- the old plugin still installed -----------------------------------------------------------


@pytest.fixture(scope="module")
def old_plugin_tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    """A TensorBoard whose Python sees an installed torch-tb-profiler (its installed metadata
    on the path, no code and no entry point, so TensorBoard loads nothing of it)."""
    root = tmp_path_factory.mktemp("old_plugin")
    site = root / "site"
    info = site / "torch_tb_profiler-0.4.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-tb-profiler\n"
                                   "Version: 0.4.3\n")
    logdir = root / "logs"
    (logdir / "cnn_bs32").mkdir(parents=True)
    for path in (SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"):
        (logdir / "cnn_bs32" / path.name).write_bytes(path.read_bytes())
    cache = root / "cache"
    cache.mkdir()
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(REPO), str(site)]))
    with launcher.running(logdir, root / "tensorboard.log", env, timeout=120) as process:
        tb = TensorBoard(process.base, logdir, {"samples": ["cnn_bs32"], "shared": []},
                         root / "tensorboard.log")
        wait_ready(tb, process.popen)
        yield tb


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_migration_banner(theme, page, dark_page, old_plugin_tensorboard, artifacts):
    tab = page if theme == "light" else dark_page
    tb = old_plugin_tensorboard
    assert tb.api("runs")["notices"]
    frame = plugin_frame(tab, tb)
    frame.wait_for_selector("[data-testid=migration-banner]", timeout=TIMEOUT_MS)
    text = frame.inner_text("[data-testid=migration-banner]")
    assert "torch-tb-profiler 0.4.3" in text and "pip uninstall torch-tb-profiler" in text
    assert "torch-tb-profiler" in tb.log_path.read_text()
    shot(tab, artifacts, f"ux_migration_banner_{theme}")


def test_copy_link_opens_the_view_inside_tensorboard(page, views_tensorboard):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Operator")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=tb.url)
    frame = plugin_frame(page, tb)
    frame.select_option("[data-testid=run-select]", sel["run"])
    frame.click("[data-testid=tab-Operator]")
    frame.fill("[data-testid=op-search]", "conv")
    frame.wait_for_function("() => location.hash.includes('op_q=conv')", timeout=TIMEOUT_MS)
    frame.click("[data-testid=copy-link]")
    wait_text(frame, "[data-testid=copy-link]", "Link copied")
    link = frame.evaluate("() => navigator.clipboard.readText()")
    parsed = urlparse(link)
    assert f"{parsed.scheme}://{parsed.netloc}" == tb.url and parsed.fragment == "torch_prof"
    assert "plugin_entry" not in link and "op_q%3Dconv" in link
    other = page.context.new_page()  # the link, as a colleague opens it
    other.goto(link)
    opened = next(f for f in _frames(other, tb))
    opened.wait_for_selector("[data-testid=tab-Operator][aria-selected=true]", timeout=TIMEOUT_MS)
    assert opened.input_value("[data-testid=op-search]") == "conv"
    other.close()


def _frames(page: Any, tb: TensorBoard) -> Iterator[Any]:
    """The plugin's frame of a TensorBoard page, once it shows the run selector."""
    for _ in range(TIMEOUT_MS // 200):
        for frame in page.frames:
            if "plugin_entry.html" in frame.url:
                frame.wait_for_selector("[data-testid=run-select]", timeout=TIMEOUT_MS)
                yield frame
                return
        page.wait_for_timeout(200)
    raise AssertionError(f"no plugin frame at {page.url}")


def test_no_request_with_the_previous_runs_worker(page, views_tensorboard, requests_log):
    tb = views_tensorboard
    first = view_selection(tb, need(tb, "cnn_bs32"), "Overview")
    second = need(tb, "ddp_gloo")
    frame = open_view(page, tb, "Overview", **first)
    frame.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
    frame.select_option("[data-testid=run-select]", second)
    workers = tb.api("workers", run=second, view="Overview")
    frame.wait_for_function(f"() => location.hash.includes('worker={workers[0]}')",
                            timeout=TIMEOUT_MS)
    frame.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
    stale = [u for u in requests_log.urls
             if f"run={second}" in u and f"worker={first['worker']}" in u]
    assert stale == []
    assert any(f"run={second}" in u and f"worker={workers[0]}" in u for u in requests_log.urls)
