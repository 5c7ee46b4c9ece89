"""Memory and Distributed views in a real TensorBoard, in chromium: the numbers on screen against
the API (peak memory, events and operator rows, overlap/wait values, a comm op's calls), zoom on
the memory curve filtering both tables, size filters, the export-only memory timeline, and no
request outside 127.0.0.1 (checked by the `page` fixtures)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest

from .harness import REPO
from .pages import (
    TIMEOUT_MS,
    assert_dark,
    device_rows,
    fmt_bytes,
    fmt_us,
    need,
    open_view,
    select,
    shot,
    table_column,
    view_selection,
    wait_request,
    wait_rows,
    wait_text,
)


def test_served_bundle_is_this_checkout(views_tensorboard):
    status, body, ctype = views_tensorboard.get("index.js")
    assert status == 200 and "javascript" in ctype
    assert body == (REPO / "tb_plugin" / "static" / "index.js").read_bytes(), \
        "TensorBoard serves another checkout's index.js (PYTHONPATH?)"
    runs = {r["name"]: r for r in views_tensorboard.api("runs")["runs"]}
    if "cnn_bs32" in runs:
        assert {"Memory", "Module", "Diff"} <= set(runs["cnn_bs32"]["views"])
    if "ddp_gloo" in runs:
        assert "Distributed" in runs["ddp_gloo"]["views"]


# -- Memory --------------------------------------------------------------------------------


def test_memory_view_matches_api(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Memory")
    payload = tb.api("memory", **sel)
    device = payload["default_device"]
    peak = payload["peaks"][device]
    frame = open_view(page, tb, "Memory", **sel)

    wait_text(frame, "[data-testid=mem-peak]", fmt_bytes(peak["bytes"]))
    assert f"{peak['bytes']:,} bytes" in frame.inner_text("[data-testid=mem-peak-sub]")
    assert frame.input_value("[data-testid=mem-device]") == device
    assert frame.locator("[data-testid=mem-curve] canvas").count() == 1

    events = device_rows(payload, "events", device)
    ops = device_rows(payload, "operators", device)
    wait_rows(frame, "mem-events", len(events))
    wait_rows(frame, "mem-ops", len(ops))
    # Small events are listed by default (no size filter hides them).
    assert min(r["bytes"] for r in events) < 1024
    # Operators: largest inclusive increase first (ties keep the API's order).
    top = sorted(ops, key=lambda r: -r["increase_bytes"])[0]
    assert table_column(frame, "mem-ops", "name")[0] == top["name"]
    # Events: largest first, sizes formatted like the stats.
    biggest = max(r["bytes"] for r in events)
    assert table_column(frame, "mem-events", "bytes")[0] == fmt_bytes(biggest)

    leaks = [x for x in payload["leaks"] if x.get("device") in (None, device)]
    assert frame.locator("[data-testid=memory-view] > [data-testid=mem-leak]").count() == len(leaks)

    # The memory-timeline export of this span: the stacked categories with its peak.
    # cnn_bs32 is recorded with memory-timeline exports, so the route must answer.
    status, _, _ = tb.get("memory/timeline", **sel)
    assert status == 200
    timeline = tb.api("memory/timeline", **sel)
    wait_text(frame, "[data-testid=mem-timeline-peak]", fmt_bytes(timeline["peak"]["bytes"]))
    assert frame.locator("[data-testid=mem-timeline] canvas").count() == 1
    # The categories listed at the peak are the series with bytes at the peak's sample.
    at = max(range(len(timeline["total"])), key=lambda i: (timeline["total"][i], -i))
    at_peak = {name for name, values in timeline["series"].items() if values[at] > 0}
    assert at_peak
    shown = frame.locator("[data-testid=mem-timeline-categories] [data-category]")
    assert {shown.nth(i).get_attribute("data-category") for i in range(shown.count())} == at_peak
    shot(page, artifacts, "memory_light")

    # Size filters, then search, on the events.
    frame.fill("[data-testid=mem-min-size]", "1 MiB")
    wait_rows(frame, "mem-events", sum(r["bytes"] >= 1 << 20 for r in events))
    frame.fill("[data-testid=mem-max-size]", "2048 KiB")
    wait_rows(frame, "mem-events", sum(1 << 20 <= r["bytes"] <= 2 << 20 for r in events))
    frame.fill("[data-testid=mem-min-size]", "")
    frame.fill("[data-testid=mem-max-size]", "")
    wait_rows(frame, "mem-events", len(events))
    frame.fill("[data-testid=mem-events-search]", "conv")
    wait_rows(frame, "mem-events", sum("conv" in r["op"].lower() for r in events))
    frame.fill("[data-testid=mem-ops-search]", "conv")
    wait_rows(frame, "mem-ops", sum("conv" in r["name"].lower() for r in ops))
    frame.click("[data-testid=mem-ops-columns] button[data-value=self]")
    assert frame.locator("[data-testid=mem-ops] [role=columnheader][data-col=increase_bytes]"
                         ).count() == 0
    assert frame.locator("[data-testid=mem-ops] [role=columnheader]"
                         "[data-col=self_increase_bytes]").count() == 1


def test_memory_zoom_filters_both_tables(page, views_tensorboard, requests_log, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Memory")
    payload = tb.api("memory", **sel)
    device = payload["default_device"]
    events = device_rows(payload, "events", device)
    frame = open_view(page, tb, "Memory", **sel)
    wait_rows(frame, "mem-events", len(events))
    # The curve is drawn and its brush armed (Chart marks data-rendered once ECharts finished).
    frame.wait_for_selector("[data-testid=mem-curve][data-rendered=true]", timeout=TIMEOUT_MS)

    # Drag across 30%..45% of the plot: the range is queried and both tables follow it.
    box = frame.locator("[data-testid=mem-curve]").bounding_box()
    y = box["y"] + box["height"] * 0.45
    page.mouse.move(box["x"] + box["width"] * 0.30, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.38, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=4)
    page.mouse.up()
    frame.wait_for_selector("[data-testid=mem-range]", timeout=TIMEOUT_MS)
    zoomed_url = wait_request(page, requests_log, lambda u: "/memory?" in u and "start_us=" in u)
    params = dict(parse_qsl(urlparse(zoomed_url).query))
    assert params["device"] == device and float(params["start_us"]) < float(params["end_us"])
    zoomed = tb.api("memory", **params)
    zoomed_events = device_rows(zoomed, "events", device)
    zoomed_ops = device_rows(zoomed, "operators", device)
    assert len(zoomed_events) < len(events)
    wait_rows(frame, "mem-events", len(zoomed_events))
    wait_rows(frame, "mem-ops", len(zoomed_ops))
    start, end = float(params["start_us"]), float(params["end_us"])
    for row in zoomed_events:  # what the table lists lies in the range
        times = [t for t in (row["alloc_t_us"], row["free_t_us"]) if t is not None]
        assert any(start <= t <= end for t in times)
    origin = payload["time_origin_us"]
    text = frame.inner_text("[data-testid=mem-range]")
    assert f"{(start - origin) / 1000:,.3f}" in text and f"{(end - origin) / 1000:,.3f}" in text
    shot(page, artifacts, "memory_zoomed_light")

    frame.click("[data-testid=mem-reset]")
    wait_rows(frame, "mem-events", len(events))
    assert frame.locator("[data-testid=mem-range]").count() == 0


def test_memory_gpu_capacity_and_devices(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "resnet50_gpu_pt19"), "Memory")
    payload = tb.api("memory", **sel)
    assert payload["default_device"] == "GPU0"
    peak = payload["peaks"]["GPU0"]
    assert peak["capacity_bytes"]
    frame = open_view(page, tb, "Memory", **sel)
    wait_text(frame, "[data-testid=mem-capacity]", fmt_bytes(peak["capacity_bytes"]))
    wait_text(frame, "[data-testid=mem-peak]", fmt_bytes(peak["bytes"]))
    assert f"{peak['fraction_of_capacity'] * 100:.2f} %" in frame.inner_text(
        "[data-testid=mem-capacity-sub]")
    options = frame.locator("[data-testid=mem-device] option").all_inner_texts()
    assert options == payload["devices"]
    frame.check("[data-testid=mem-show-capacity]")
    # Without addresses (PyTorch < 1.10) no pair can be made: the notes say why.
    assert "no addresses" in frame.inner_text("[data-testid=mem-messages]")
    shot(page, artifacts, "memory_gpu_capacity_light")

    select(frame, "mem-device", "CPU")
    cpu = tb.api("memory", **sel, device="CPU")["peaks"]["CPU"]
    wait_text(frame, "[data-testid=mem-peak]", fmt_bytes(cpu["bytes"]))
    page.wait_for_function("() => location.hash.includes('mem_device=CPU')")


def test_memory_export_only_run(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    run = need(tb, "memory_timeline_raw")
    timeline = tb.api("memory/timeline", run=run)
    frame = open_view(page, tb, "Memory", run=run)
    frame.wait_for_selector("[data-testid=mem-export-only]", timeout=TIMEOUT_MS)
    wait_text(frame, "[data-testid=mem-timeline-peak]", fmt_bytes(timeline["peak"]["bytes"]))
    shown = frame.locator("[data-testid=mem-timeline-categories] [data-category]")
    nonzero = [c for c in timeline["categories"] if any(v != 0 for v in timeline["series"][c])]
    assert 0 < shown.count() <= len(nonzero)
    shot(page, artifacts, "memory_export_only_light")


def test_memory_dark(dark_page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Memory")
    frame = open_view(dark_page, tb, "Memory", **sel)
    frame.wait_for_selector("[data-testid=mem-timeline] canvas", timeout=TIMEOUT_MS)
    assert dark_page.evaluate("document.documentElement.dataset.theme") == "dark"
    shot(dark_page, artifacts, "memory_dark")


# -- Distributed ---------------------------------------------------------------------------


def check_distributed(frame: Any, payload: dict[str, Any]) -> None:
    workers = payload["workers"]
    rows = frame.locator("[data-testid=dist-device-table] tbody tr")
    assert rows.count() == sum(max(1, len(d["gpus"])) for d in payload["devices"])
    for card, key in (("dist-overlap", "overlap"), ("dist-wait", "wait")):
        values = payload[key]["all"]
        for worker in workers:
            if worker not in values:
                continue
            row = frame.locator(f"[data-testid={card}-table] tr[data-worker='{worker}']")
            for name, value in values[worker].items():
                assert row.locator(f"td[data-col={name}]").inner_text() == fmt_us(value), \
                    (card, worker, name)
    # A comm op's calls and latency, per worker.
    for worker in workers:
        ops = payload["comm_ops"].get(worker, {}).get("rows", [])
        select(frame, "dist-ops-worker", worker)
        wait_rows(frame, "dist-ops", len(ops))
        for op in ops:
            names = table_column(frame, "dist-ops", "name")
            i = names.index(op["name"])
            assert table_column(frame, "dist-ops", "calls")[i] == f"{op['calls']:,}"
            assert table_column(frame, "dist-ops", "total_latency_us")[i] == \
                fmt_us(op["total_latency_us"])
    if payload["messages"]:
        text = frame.inner_text("[data-testid=dist-messages]")
        assert payload["messages"][0] in text


def test_distributed_view_matches_api(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    run = need(tb, "ddp_gloo")
    span = tb.api("spans", run=run, worker=tb.api("workers", run=run, view="Distributed")[0])[0]
    payload = tb.api("distributed", run=run, span=span)
    assert len(payload["workers"]) == 2
    frame = open_view(page, tb, "Distributed", run=run, span=span)
    frame.wait_for_selector("[data-testid=dist-overlap-table]", timeout=TIMEOUT_MS)
    assert frame.locator("[data-testid=worker-select]").count() == 0  # run-level view
    check_distributed(frame, payload)
    assert frame.locator("[data-testid=dist-overlap-chart] canvas").count() == 1
    assert frame.locator("[data-testid=dist-wait-chart] canvas").count() == 1
    shot(page, artifacts, "distributed_light")

    # One step instead of the mean over steps.
    step = payload["steps"][0]
    select(frame, "dist-overlap-step", step)
    worker = payload["workers"][0]
    expected = payload["overlap"][step][worker]["computation"]
    wait_text(frame, f"[data-testid=dist-overlap-table] tr[data-worker='{worker}'] "
                     "td[data-col=computation]", fmt_us(expected))
    select(frame, "dist-wait-step", step)
    expected = payload["wait"][step][worker]["synchronizing"]
    wait_text(frame, f"[data-testid=dist-wait-table] tr[data-worker='{worker}'] "
                     "td[data-col=synchronizing]", fmt_us(expected))


@pytest.mark.parametrize("run", ["ddp_2ranks_sampled", "nccl_collectives"])
def test_distributed_nccl_traces(page, views_tensorboard, artifacts, run):
    tb = views_tensorboard
    need(tb, run)
    span = tb.api("spans", run=run, worker=tb.api("workers", run=run, view="Distributed")[0])[0]
    payload = tb.api("distributed", run=run, span=span)
    frame = open_view(page, tb, "Distributed", run=run, span=span)
    frame.wait_for_selector("[data-testid=dist-overlap-table]", timeout=TIMEOUT_MS)
    check_distributed(frame, payload)
    groups = [r["group"] for r in payload["groups"]["rows"]]  # issue 28: per process group
    assert groups and sorted(table_column(frame, "dist-groups", "group")) == sorted(groups)
    gpus = [g for d in payload["devices"] for g in d["gpus"] if g["name"]]
    if gpus:
        assert gpus[0]["name"] in frame.inner_text("[data-testid=dist-device-table]")
    shot(page, artifacts, f"distributed_{run}_light")


def test_distributed_dark(dark_page, views_tensorboard, artifacts):
    tb = views_tensorboard
    run = need(tb, "ddp_gloo")
    frame = open_view(dark_page, tb, "Distributed", run=run)
    frame.wait_for_selector("[data-testid=dist-overlap-chart] canvas", timeout=TIMEOUT_MS)
    assert_dark(frame, "[data-testid=dist-overlap-chart]")
    shot(dark_page, artifacts, "distributed_dark")
