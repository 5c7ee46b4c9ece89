"""The plugin in a real TensorBoard, in chromium: every view, numbers against the API, controls,
errors, URL state, 100k-row table, themes, and no request outside 127.0.0.1 (checked by the
`page` fixture for every test)."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import launcher, need_shipped

from .harness import PLUGIN, RequestLog, new_page
from .pages import (
    TIMEOUT_MS,
    choose,
    first_sample,
    fmt_duration,
    gpu_run,
    open_entry,
    open_tab,
    plugin_frame,
    select,
    selection_of,
    shot,
    table_column,
    wait_rows,
    wait_text,
)


def test_overview_in_tensorboard_matches_api(page, tensorboard, artifacts):
    run = first_sample(tensorboard)
    sel = selection_of(tensorboard, run)
    overview = tensorboard.api("overview", **sel)
    frame = plugin_frame(page, tensorboard)
    choose(frame, run, sel["worker"], sel["span"])
    open_tab(frame, "Overview")

    wait_text(frame, "[data-testid=avg-step-time]", fmt_duration(overview['average']['total_us']))
    rows = frame.locator("[data-testid=breakdown-table] tbody tr")
    assert rows.count() == len(overview["categories"])
    for i, category in enumerate(overview["categories"]):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[0].strip() == category
        assert cells[1].strip() == fmt_duration(overview["average"]["breakdown_us"][category])
    expected_device = overview["environment"].get("device_type", "CPU")
    assert frame.inner_text("[data-testid=device-type]") == expected_device
    runs = {r["name"]: r for r in tensorboard.api("runs")["runs"]}
    assert frame.inner_text("[data-testid=worker-count]") == str(len(runs[run]["workers"]))
    assert frame.locator("[data-testid=step-chart] canvas").count() == 1
    assert frame.locator("[data-testid=recommendation]").count() == len(overview["recommendations"])
    shot(page, artifacts, "overview_light")


def test_overview_gpu_trace(page, tensorboard, artifacts):
    run = gpu_run(tensorboard)
    sel = selection_of(tensorboard, run)
    overview = tensorboard.api("overview", **sel)
    frame = open_entry(page, tensorboard, f"run={run}&view=Overview")
    wait_text(frame, "[data-testid=avg-step-time]", fmt_duration(overview['average']['total_us']))
    assert frame.inner_text("[data-testid=device-type]") == "GPU"
    assert frame.locator("[data-testid=gpu]").count() == len(overview["gpus"])
    gpu = overview["gpus"][0]
    assert gpu["name"] in frame.inner_text("[data-testid=configuration]")
    # A recommendation naming a view links to it; priced ones say what they save.
    links = frame.locator("[data-testid=rec-view-link]")
    assert links.count() > 0, "the GPU trace's recommendations name their views"
    assert frame.locator("[data-testid=rec-saving]").count() == sum(
        r["saving_us"] is not None for r in overview["recommendations"])
    shot(page, artifacts, "overview_gpu_light")
    target = next(r["view"] for r in overview["recommendations"] if r.get("view"))
    links.first.click()
    frame.wait_for_selector(f"[data-testid=tab-{target}][aria-selected=true]")


def test_recommendation_evidence_opens_the_trace_on_its_range(page, tensorboard, artifacts):
    """Each recommendation with an evidence range opens the Trace view zoomed to that range
    (5% margin on each side), not the whole trace; the evidence text is relative to its step."""
    run = gpu_run(tensorboard)
    sel = selection_of(tensorboard, run)
    ranged = [r for r in tensorboard.api("overview", **sel)["recommendations"]
              if r["start_us"] is not None]
    assert ranged, "the GPU trace's recommendations carry evidence ranges"
    page.add_init_script("window.__TORCH_PROF_DEBUG__ = true")
    for index, rec in enumerate(ranged):
        frame = open_entry(page, tensorboard, f"run={run}&view=Overview")
        evidence = frame.locator("[data-testid=rec-evidence]").nth(index).inner_text()
        assert f"into step {rec['evidence_step']}" in evidence and "trace time" not in evidence
        frame.locator("[data-testid=rec-show-on-trace]").nth(index).click()
        root = "[data-testid=trace-canvas-root]"
        frame.wait_for_selector(f"{root}[data-state=ready]", timeout=TIMEOUT_MS)
        frame.wait_for_selector(f"{root}:not([data-draw-pending='1'])", state="attached")
        origin = float(frame.get_attribute(root, "data-trace-start"))
        start, end = rec["start_us"] - origin, rec["end_us"] - origin
        pad = max(0.05 * (end - start), 0.05)
        view = (float(frame.get_attribute(root, "data-view-start")),
                float(frame.get_attribute(root, "data-view-end")))
        assert view == pytest.approx((max(0.0, start - pad), end + pad), abs=1e-3), (rec, view)
        if index == 0:
            shot(page, artifacts, "recommendation_evidence_on_trace")
    assert "t_win=" in page.url
    frame.select_option("[data-testid=span-select]", "2")  # another span: not its window
    frame.wait_for_function("() => !window.location.hash.includes('t_win=')")


def test_recommendation_what_if_replays_its_edit(page, tensorboard, artifacts):
    """A priced recommendation's "What if" opens the GPU Idle tab's what-if panel with its edit
    and shows the replay's prediction (the numbers of `/whatif`)."""
    run = gpu_run(tensorboard)
    sel = selection_of(tensorboard, run)
    recs = tensorboard.api("overview", **sel)["recommendations"]
    rec = next(r for r in recs if r["whatif"])
    expected = tensorboard.api("whatif", **sel, edit=rec["whatif"])
    assert expected["predicted_us"] < expected["original_us"]
    frame = open_entry(page, tensorboard, f"run={run}&view=Overview")
    frame.locator("[data-testid=rec-whatif]").first.click()
    frame.wait_for_selector("[data-testid='tab-GPU Idle'][aria-selected=true]")
    assert frame.input_value("[data-testid=whatif-edit]") == rec["whatif"]
    headline = frame.locator("[data-testid=whatif-headline]")
    headline.wait_for(timeout=TIMEOUT_MS)
    assert fmt_duration(expected["predicted_us"]) in headline.inner_text()
    rows = frame.locator("[data-testid=whatif-steps] tbody tr")
    assert rows.count() == len(expected["steps"])
    shot(page, artifacts, "whatif_panel")
    frame.fill("[data-testid=whatif-edit]", "bogus=1")
    frame.click("[data-testid=whatif-run]")
    frame.wait_for_selector("text=unknown target", timeout=TIMEOUT_MS)


def test_operator_view(page, tensorboard, artifacts):
    run = first_sample(tensorboard)
    sel = selection_of(tensorboard, run)
    table = tensorboard.api("operators", **sel, group_by="operator")
    rows = table["rows"]
    frame = plugin_frame(page, tensorboard)
    choose(frame, run, sel["worker"], sel["span"])
    open_tab(frame, "Operator")
    frame.wait_for_selector("[data-testid=op-table]", timeout=TIMEOUT_MS)

    # Default: every row, by the server's sort key; the first row is the API's first row.
    key = table["sort_by"]
    top = sorted(rows, key=lambda r: -r[key])
    wait_rows(frame, "op-table", len(rows))
    assert table_column(frame, "op-table", "name")[0] == top[0]["name"]
    assert table_column(frame, "op-table", "category")[0] == top[0]["category"]
    assert table_column(frame, "op-table", "host_self_us")[0] == \
        fmt_duration(top[0]["host_self_us"])
    if not table["has_device"]:
        assert frame.locator("[data-testid=pie-device-self]").count() == 0
        assert frame.locator("[data-testid=pie-host-self] canvas").count() == 1
    shot(page, artifacts, "operator_light")

    # Top-N on request: 10, then 5, then all rows again.
    frame.fill("[data-testid=op-topn]", "10")
    wait_rows(frame, "op-table", min(10, len(rows)))
    frame.fill("[data-testid=op-topn]", "5")
    wait_rows(frame, "op-table", min(5, len(rows)))
    frame.fill("[data-testid=op-topn]", "all")
    wait_rows(frame, "op-table", len(rows))

    # Sorting: Calls descending, then ascending.
    frame.click("[data-testid=op-table] [role=columnheader][data-col=calls]")
    calls = [int(c.replace(",", "")) for c in table_column(frame, "op-table", "calls")]
    assert calls[0] == max(r["calls"] for r in rows)
    assert calls == sorted(calls, reverse=True)
    frame.click("[data-testid=op-table] [role=columnheader][data-col=calls]")
    calls = [int(c.replace(",", "")) for c in table_column(frame, "op-table", "calls")]
    assert calls[0] == min(r["calls"] for r in rows)
    assert frame.get_attribute("[data-testid=op-table] [data-col=calls][role=columnheader]",
                               "aria-sort") == "ascending"
    # Name ascending.
    frame.click("[data-testid=op-table] [role=columnheader][data-col=name]")
    names = table_column(frame, "op-table", "name")
    assert names[0] == min((r["name"] for r in rows), key=str.lower)
    assert names == sorted(names, key=str.lower)

    # Search (case-insensitive substring).
    term = "conv" if any("conv" in r["name"].lower() for r in rows) else rows[0]["name"][-4:]
    frame.fill("[data-testid=op-search]", term.upper())
    expected = [r for r in rows if term.lower() in r["name"].lower()]
    wait_rows(frame, "op-table", len(expected))
    assert all(term.lower() in n.lower() for n in table_column(frame, "op-table", "name"))
    frame.fill("[data-testid=op-search]", "")

    # Group by operator + input shape.
    shaped = tensorboard.api("operators", **sel, group_by="operator_input_shape")["rows"]
    frame.click("[data-testid=op-group] button[data-value=operator_input_shape]")
    wait_rows(frame, "op-table", len(shaped))
    assert frame.locator("[data-testid=op-table] [role=columnheader][data-col=input_shape]").count()

    # CSV: the link is the route with format=csv, relative to the plugin.
    href = frame.get_attribute("[data-testid=op-csv]", "href")
    assert href.startswith(tensorboard.api_base + "operators?") and "format=csv" in href
    with urllib.request.urlopen(href, timeout=60) as resp:
        assert "csv" in resp.headers.get("Content-Type", "")
        parsed = list(csv.reader(io.StringIO(resp.read().decode("utf-8"))))
    assert len(parsed) - 1 == len(shaped)
    with page.expect_download() as download:
        frame.click("[data-testid=op-csv]")
    assert download.value.suggested_filename


def test_operator_call_stack_jump_to_source(page, tensorboard):
    for run in tensorboard.runs["samples"] + tensorboard.runs["shared"]:
        sel = selection_of(tensorboard, run)
        rows = tensorboard.api("operators", **sel, group_by="operator")["rows"]
        with_stack = [r for r in rows if r.get("has_call_stack")]
        if with_stack:
            break
    need_shipped(bool(with_stack), "a sample run with call stacks")
    target = with_stack[0]
    stacks = tensorboard.api("operators/stack", **sel, group_by="operator", name=target["name"])
    frame = plugin_frame(page, tensorboard)
    page.evaluate("""() => { window.__tp_messages = [];
        window.addEventListener('message', (e) => window.__tp_messages.push(
            {data: e.data, origin: e.origin})) }""")
    choose(frame, run, sel["worker"], sel["span"])
    open_tab(frame, "Operator")
    frame.fill("[data-testid=op-search]", target["name"])
    frame.wait_for_selector("[data-testid=op-table] [aria-expanded]", timeout=TIMEOUT_MS)
    row = frame.locator("[data-testid=op-table] [data-testid=table-row]").filter(
        has=frame.locator(f"[data-col=name] >> text='{target['name']}'"))
    row.locator("[aria-expanded]").click()
    frame.wait_for_selector("[data-testid=call-stacks]", timeout=TIMEOUT_MS)
    stack_rows = stacks["rows"] if isinstance(stacks, dict) else stacks
    assert frame.locator("[data-testid=call-stacks] .stack").count() == len(stack_rows)
    link = frame.locator("[data-testid=frame-link]").first
    link.click()
    page.wait_for_function("() => window.__tp_messages.some((m) => m.data && m.data.filename)")
    messages = page.evaluate("() => window.__tp_messages.filter((m) => m.data && m.data.filename)")
    assert messages[0]["origin"] == tensorboard.url
    assert isinstance(messages[0]["data"]["line"], int)
    assert messages[0]["data"]["filename"] in stack_rows[0]["call_stack"]


def test_kernel_view(page, tensorboard, artifacts):
    run = gpu_run(tensorboard)
    sel = selection_of(tensorboard, run)
    payload = tensorboard.api("kernels", **sel, group_by="kernel")
    rows = payload["rows"]
    frame = open_entry(page, tensorboard, f"run={run}&view=Kernel")
    frame.wait_for_selector("[data-testid=k-table]", timeout=TIMEOUT_MS)
    top = max(rows, key=lambda r: r["total_us"])
    wait_rows(frame, "k-table", len(rows))  # every row by default
    assert table_column(frame, "k-table", "name")[0] == top["name"]
    assert table_column(frame, "k-table", "total_us")[0] == fmt_duration(top["total_us"])
    assert table_column(frame, "k-table", "category")[0] == top["category"]
    line = frame.inner_text("[data-testid=k-categories]")
    for c in payload["categories"]:
        assert (c["category"] in line) is (c["time_us"] > 0), c
    assert frame.locator("[data-testid=pie-kernels] canvas").count() == 1
    assert frame.locator("[data-testid=pie-tensor-cores]").count() == 1
    shot(page, artifacts, "kernel_light")

    # Search by kernel name.
    frame.fill("[data-testid=k-topn]", "all")
    term = "sgemm" if any("sgemm" in r["name"] for r in rows) else rows[0]["name"][:6]
    frame.fill("[data-testid=k-search]", term)
    wait_rows(frame, "k-table", sum(term.lower() in r["name"].lower() for r in rows))
    frame.fill("[data-testid=k-search]", "")

    # Group by kernel + operator + launch config, then search by operator.
    op_rows = tensorboard.api("kernels", **sel, group_by="kernel_op_launch")["rows"]
    frame.click("[data-testid=k-group] button[data-value=kernel_op_launch]")
    wait_rows(frame, "k-table", len(op_rows))
    for col in ("operator", "grid", "block"):
        assert frame.locator(f"[data-testid=k-table] [role=columnheader][data-col={col}]").count()
    op = next(r["operator"] for r in op_rows if r.get("operator") not in (None, "", "N/A"))
    frame.fill("[data-testid=k-op-search]", op)
    wait_rows(frame, "k-table", sum(op.lower() in (r.get("operator") or "").lower()
                                    for r in op_rows))
    shot(page, artifacts, "kernel_op_launch_light")

    # Sort by mean duration.
    frame.click("[data-testid=k-table] [role=columnheader][data-col=mean_us]")
    scale = {"us": 1.0, "ms": 1e3, "s": 1e6}  # a unit per magnitude (format.ts `duration`)
    means = [float(v.split()[0].replace(",", "")) * scale[v.split()[1]]
             for v in table_column(frame, "k-table", "mean_us")]
    assert means == sorted(means, reverse=True)

    href = frame.get_attribute("[data-testid=k-csv]", "href")
    assert "format=csv" in href and "group_by=kernel_op_launch" in href
    with urllib.request.urlopen(href, timeout=60) as resp:
        parsed = list(csv.reader(io.StringIO(resp.read().decode("utf-8"))))
    assert len(parsed) - 1 == len(op_rows)


def test_broken_worker_shows_its_error(page, tensorboard, artifacts):
    runs = {r["name"]: r for r in tensorboard.api("runs")["runs"]}
    workers = {w["name"]: w for w in runs["broken_worker"]["workers"]}
    bad = workers["bad_worker"]["spans"][0]
    assert bad["state"] == "error" and bad["messages"]
    frame = open_entry(page, tensorboard, "run=broken_worker&worker=bad_worker&view=Overview")
    banner = frame.wait_for_selector("[data-testid=worker-error-banner]", timeout=TIMEOUT_MS)
    text = banner.inner_text()
    assert "bad_worker" in text and bad["messages"][0] in text
    status = frame.locator("[data-testid=worker-status] li[data-worker=bad_worker]")
    assert status.locator(".span-chip.state-error").count() == 1
    assert bad["messages"][0] in status.inner_text()
    shot(page, artifacts, "broken_worker_light")

    # The worker cut off mid-event: a warning, and the events before the cut still show.
    cut = workers["cut_worker"]["spans"][0]
    select(frame, "worker-select", "cut_worker")
    if cut["state"] in ("partial", "truncated"):
        warning = frame.wait_for_selector("[data-testid=worker-warning-banner]", timeout=TIMEOUT_MS)
        assert cut["messages"][0] in warning.inner_text()
        frame.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
    # The good worker of the same run is unaffected.
    if "good" in workers:
        select(frame, "worker-select", "good")
        frame.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
        assert frame.locator("[data-testid=worker-error-banner]").count() == 0


def test_url_state_survives_reload(page, tensorboard):
    run = tensorboard.runs["samples"][-1] if tensorboard.runs["samples"] else "many_ops"
    frame = open_entry(page, tensorboard)
    select(frame, "run-select", run)
    open_tab(frame, "Operator")
    frame.wait_for_selector("[data-testid=op-table]", timeout=TIMEOUT_MS)
    frame.click("[data-testid=op-group] button[data-value=operator_input_shape]")
    frame.fill("[data-testid=op-search]", "aten")
    frame.fill("[data-testid=op-topn]", "7")
    frame.click("[data-testid=op-table] [role=columnheader][data-col=calls]")
    spans = frame.locator("[data-testid=span-select] option").all_inner_texts()
    if len(spans) > 1:
        select(frame, "span-select", "2")
    page.wait_for_function("() => location.hash.includes('op_top=7')")
    url = page.url
    for part in (f"run={run}", "view=Operator", "op_group=operator_input_shape", "op_q=aten",
                 "op_sort=-calls"):
        assert part in url, url
    assert "name=torch_prof" in url  # TensorBoard's query stays intact

    page.reload()
    page.wait_for_selector("[data-testid=op-table]", timeout=TIMEOUT_MS)
    assert page.input_value("[data-testid=run-select]") == run
    assert page.get_attribute("[data-testid=tab-Operator]", "aria-selected") == "true"
    assert page.get_attribute("[data-testid=op-group] button[data-value=operator_input_shape]",
                              "aria-checked") == "true"
    assert page.input_value("[data-testid=op-search]") == "aten"
    assert page.input_value("[data-testid=op-topn]") == "7"
    assert page.get_attribute("[data-testid=op-table] [role=columnheader][data-col=calls]",
                              "aria-sort") == "descending"
    if len(spans) > 1:
        assert page.input_value("[data-testid=span-select]") == "2"

    # The same URL opened in a fresh page (a shared link) shows the same state.
    other = page.context.new_page()
    other.goto(url)
    other.wait_for_selector("[data-testid=op-table]", timeout=TIMEOUT_MS)
    assert other.input_value("[data-testid=op-search]") == "aten"
    other.close()


def test_virtualised_table_with_100k_rows(page, tensorboard, artifacts):
    sel = selection_of(tensorboard, "many_ops")
    rows = tensorboard.api("operators", **sel, group_by="operator")["rows"]
    assert len(rows) >= 100_000
    frame = open_entry(page, tensorboard, "run=many_ops&view=Operator&op_top=all")
    wait_rows(frame, "op-table", len(rows))
    rendered = frame.locator("[data-testid=op-table] [data-testid=table-row]").count()
    assert 0 < rendered < 200, f"{rendered} rows in the DOM: the table is not virtualised"

    # Scroll through the whole table in big jumps (how fast is bench/'s business, not a test's).
    scroller = "[data-testid=op-table]"
    page.evaluate(
        """async (sel) => {
            const el = document.querySelector(sel);
            for (let i = 1; i <= 20; i++) {
                el.scrollTop = (el.scrollHeight * i) / 20;
                await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
            } }""",
        scroller,
    )
    names = table_column(frame, "op-table", "name")
    # At the bottom, the last rows of the table's default order (the server's) are rendered.
    assert rows[-1]["name"] in names, (rows[-1]["name"], names[-5:])
    assert frame.locator("[data-testid=op-table] [data-testid=table-row]").count() < 200
    # Sorting 100k rows by name works.
    frame.click("[data-testid=op-table] [role=columnheader][data-col=name]")
    frame.wait_for_selector("[data-testid=op-table] [role=columnheader][data-col=name]"
                            "[aria-sort=ascending]")
    shot(page, artifacts, "operator_100k_rows")


def test_dark_theme(dark_page, tensorboard, artifacts):
    run = gpu_run(tensorboard) if "resnet50_gpu_pt19" in tensorboard.runs["shared"] \
        else first_sample(tensorboard)
    frame = plugin_frame(dark_page, tensorboard)
    choose(frame, run)
    frame.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
    assert frame.evaluate("() => document.documentElement.dataset.theme") == "dark"
    bg = frame.evaluate("() => getComputedStyle(document.body).backgroundColor")
    channels = [int(c) for c in re.findall(r"\d+", bg)[:3]]
    assert max(channels) < 80, bg
    shot(dark_page, artifacts, "overview_dark")
    open_tab(frame, "Operator")
    frame.wait_for_selector("[data-testid=op-table]", timeout=TIMEOUT_MS)
    shot(dark_page, artifacts, "operator_dark")
    if frame.locator("[data-testid=tab-Kernel]").count():
        open_tab(frame, "Kernel")
        frame.wait_for_selector("[data-testid=k-table]", timeout=TIMEOUT_MS)
        shot(dark_page, artifacts, "kernel_dark")


def test_follows_tensorboard_dark_mode_toggle(page, tensorboard):
    """TensorBoard's own theme switch (the `dark-mode` class on its body) restyles the plugin."""
    frame = plugin_frame(page, tensorboard)
    assert frame.evaluate("() => document.documentElement.dataset.theme") == "light"
    page.evaluate("() => document.body.classList.add('dark-mode')")
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    page.evaluate("() => document.body.classList.remove('dark-mode')")
    frame.wait_for_function("() => document.documentElement.dataset.theme === 'light'")


def test_worker_and_span_selection(page, tensorboard):
    need_shipped("ddp_gloo" in tensorboard.runs["samples"], "samples/ddp_gloo")
    workers = tensorboard.api("workers", run="ddp_gloo", view="Overview")
    assert len(workers) == 2
    frame = open_entry(page, tensorboard, "run=ddp_gloo&view=Overview")
    options = frame.locator("[data-testid=worker-select] option")
    # The selector fills in once the worker list arrives: wait for it instead of racing it.
    deadline = time.time() + TIMEOUT_MS / 1000
    while options.count() < len(workers) and time.time() < deadline:
        time.sleep(0.1)
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == workers
    for worker in workers:
        spans = tensorboard.api("spans", run="ddp_gloo", worker=worker)
        select(frame, "worker-select", worker)
        for span in spans:
            if len(spans) > 1:
                select(frame, "span-select", span)
            else:
                assert frame.locator("[data-testid=span-select]").count() == 0
            data = tensorboard.api("overview", run="ddp_gloo", worker=worker, span=span)
            wait_text(frame, "[data-testid=avg-step-time]",
                      fmt_duration(data['average']['total_us']))


# -- separate TensorBoards: empty log dir, --path_prefix --------------------------------------


@contextlib.contextmanager
def _own_tensorboard(tmp_path: Path, logdir: Path, *extra: str) -> Iterator[str]:
    """A TensorBoard of the test's own (tests/support/launcher.py) with a fresh cache; yields
    its origin (`http://127.0.0.1:PORT`, without any --path_prefix)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(cache))
    with launcher.running(logdir, tmp_path / "tensorboard.log", env, *extra) as process:
        parts = urlsplit(process.base)
        yield f"{parts.scheme}://{parts.netloc}"


def test_no_runs_help(browser, tmp_path):
    logdir = tmp_path / "empty"
    logdir.mkdir()
    requests = RequestLog()
    with _own_tensorboard(tmp_path, logdir) as url:
        context, page, errors = new_page(browser, "light", requests)
        try:
            page.goto(f"{url}/data/plugin_entry.html?name={PLUGIN}")
            help_card = page.wait_for_selector("[data-testid=no-runs]", timeout=TIMEOUT_MS)
            text = help_card.inner_text()
            assert "tensorboard_trace_handler" in text
            assert "from tb_plugin.recorder import Recorder" in text
        finally:
            context.close()
    assert not requests.outside() and not errors


def test_path_prefix(browser, tmp_path, tensorboard):
    run = first_sample(tensorboard)
    logdir = tmp_path / "logs"
    shutil.copytree(tensorboard.logdir / run, logdir / run)
    requests = RequestLog()
    with _own_tensorboard(tmp_path, logdir, "--path_prefix", "/tb/sub") as url:
        context, page, errors = new_page(browser, "light", requests)
        try:
            page.goto(f"{url}/tb/sub/data/plugin_entry.html?name={PLUGIN}#view=Overview")
            page.wait_for_selector("[data-testid=avg-step-time]", timeout=TIMEOUT_MS)
            api_urls = [u for u in requests.urls if f"/data/plugin/{PLUGIN}/" in u]
            assert api_urls and all(u.startswith(f"{url}/tb/sub/") for u in api_urls), api_urls
        finally:
            context.close()
    assert not requests.outside() and not errors
