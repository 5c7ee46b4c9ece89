"""Distributed view, cross-rank parts (issue 14), in a real TensorBoard and chromium: the matched
collective table (sorting, CSV), the straggler table and recommendation, the arrival-skew heat
map, bus bandwidth, and the coverage warning, against the API's numbers."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import unquote

from .pages import TIMEOUT_MS, assert_dark, fmt_us, need, open_view, shot, table_column, wait_rows


def _open(page: Any, tb: Any, run: str) -> tuple[Any, dict[str, Any]]:
    need(tb, run)
    span = tb.api("spans", run=run, worker=tb.api("workers", run=run, view="Distributed")[0])[0]
    payload = tb.api("distributed", run=run, span=span)
    frame = open_view(page, tb, "Distributed", run=run, span=span)
    frame.wait_for_selector("[data-testid=dist-overlap-table]", timeout=TIMEOUT_MS)
    return frame, payload


def test_dlrm_collectives_stragglers_heat_map(page, views_tensorboard, artifacts):
    frame, payload = _open(page, views_tensorboard, "param_dlrm_8ranks_nccl")
    rows = payload["collectives"]["rows"]
    wait_rows(frame, "dist-coll", len(rows))
    # default sort: the largest skew first, its last arriver as the API says
    worst = max(rows, key=lambda r: r["skew_us"])
    assert table_column(frame, "dist-coll", "skew_us")[0] == fmt_us(worst["skew_us"])
    assert table_column(frame, "dist-coll", "last_arriver")[0] == worst["last_arriver"]
    # sorting by id puts the collectives in order
    header = "[data-testid=dist-coll] [role=columnheader][data-col=id]"
    frame.click(header)
    frame.wait_for_selector(f"{header}[aria-sort=ascending]", timeout=TIMEOUT_MS)
    ids = table_column(frame, "dist-coll", "id")
    assert ids == sorted(ids, key=int) and ids[0] == "0"
    # CSV: one line per collective, the payload's values
    href = frame.get_attribute("[data-testid=dist-coll-csv]", "href")
    table = list(csv.DictReader(io.StringIO(unquote(href.split(",", 1)[1]))))
    assert len(table) == len(rows)
    first = next(r for r in table if r["id"] == "0")
    assert first["last_arriver"] == rows[0]["last_arriver"]
    assert float(first["busbw_gbps"]) == rows[0]["busbw_gbps"]
    # stragglers: the recommendation names the rank the API names
    text = frame.inner_text("[data-testid=dist-recommendation]")
    assert text == payload["recommendations"][0]
    top = payload["stragglers"]["rows"][0]
    assert table_column(frame, "dist-stragglers", "worker")[0] == top["worker"]
    assert table_column(frame, "dist-stragglers", "imposed_wait_us")[0] == \
        fmt_us(top["imposed_wait_us"])
    assert table_column(frame, "dist-stragglers", "imposed_share")[0] == \
        f"{top['imposed_share'] * 100:.2f} %"
    # heat map: ranks x collectives cells, each with the API's wait
    heat = payload["heatmap"]
    cells = frame.locator("[data-testid=dist-heat-grid] .dist-heat-cell")
    assert cells.count() == len(heat["rows"]) * len(heat["collectives"]["columns"])
    assert cells.nth(0).get_attribute("data-value") == _value(heat["collectives"]["values"][0][0])
    frame.locator("[data-testid=dist-heat-mode] button", has_text="By step").click()
    frame.wait_for_function(
        "n => document.querySelectorAll('[data-testid=dist-heat-grid] .dist-heat-cell').length"
        " === n", arg=len(heat["rows"]) * len(heat["steps"]["columns"]), timeout=TIMEOUT_MS)
    # bus bandwidth per collective kind
    bandwidth = frame.inner_text("[data-testid=dist-bandwidth-table]")
    for row in payload["bandwidth"]:
        assert f"{row['busbw_gbps']:.2f} GB/s" in bandwidth
    assert frame.locator("[data-testid=dist-coverage]").count() == 0
    shot(page, artifacts, "distributed_ranks_light")


def _value(value: Any) -> str:
    """As JavaScript writes the number into the data-value attribute."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def test_cpu_only_warns_missing_ranks(page, views_tensorboard, artifacts):
    frame, payload = _open(page, views_tensorboard, "cpu_only")
    banner = frame.inner_text("[data-testid=dist-coverage]")
    assert "1 of 300 ranks present" in banner and payload["coverage"]["message"] in banner
    worker = payload["workers"][0]
    assert frame.inner_text(f"[data-testid=dist-wait-table] tr[data-worker='{worker}'] "
                            "td[data-col=unmatched]") == \
        fmt_us(payload["wait"]["all"][worker]["unmatched"])
    assert payload["devices"][0]["pid"] in frame.inner_text("[data-testid=dist-device-table]")
    shot(page, artifacts, "distributed_cpu_only")


def test_single_rank_group_shows_no_bandwidth(page, views_tensorboard):
    frame, payload = _open(page, views_tensorboard, "ns_resolution")
    assert payload["bandwidth"] == []
    assert "No bandwidth to report" in frame.inner_text("[data-testid=dist-bandwidth]")
    wait_rows(frame, "dist-coll", len(payload["collectives"]["rows"]))
    assert set(table_column(frame, "dist-coll", "busbw_gbps")) == {"–"}


def test_cross_rank_dark(dark_page, views_tensorboard, artifacts):
    frame, _ = _open(dark_page, views_tensorboard, "param_dlrm_8ranks_nccl")
    frame.wait_for_selector("[data-testid=dist-heat-grid]", timeout=TIMEOUT_MS)
    assert_dark(frame, "[data-testid=dist-heatmap]")
    shot(dark_page, artifacts, "distributed_ranks_dark")
