"""Module and Diff views in a real TensorBoard, in chromium: module tree and flame graph against
the API (a module's host total, expand/collapse, search, zoom), the diff of cnn_bs32 against
cnn_bs64 (totals, a child's delta, drill-down and back, operator deltas sorted by |delta|,
column groups), experiment selectors, and no request outside 127.0.0.1."""

from __future__ import annotations

from typing import Any

from .harness import TensorBoard
from .pages import (
    TIMEOUT_MS,
    assert_dark,
    fmt_duration,
    fmt_signed_duration,
    fmt_us,
    need,
    open_entry,
    open_view,
    select,
    shot,
    table_column,
    view_selection,
    wait_rows,
    wait_text,
)


def flatten(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        out.append(row)
        out.extend(flatten(row.get("children") or []))
    return out


def wait_tree_rows(frame: Any, count: int) -> None:
    frame.wait_for_selector(f"[data-testid=module-tree][data-rows='{count}']", timeout=TIMEOUT_MS)


def module_cell(frame: Any, key: str, col: str) -> str:
    return frame.inner_text(f"[data-testid=module-row][data-key='{key}'] [data-col={col}]")


# -- Module --------------------------------------------------------------------------------


def test_module_view_matches_api(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Module")
    payload = tb.api("modules", **sel)
    assert payload["available"]
    rows = flatten(payload["rows"])
    frame = open_view(page, tb, "Module", **sel)
    wait_tree_rows(frame, len(rows))  # a small tree opens fully
    for row in rows:
        assert module_cell(frame, row["key"], "host_total_us") == fmt_us(row["host_total_us"])
        assert module_cell(frame, row["key"], "occurrences") == f"{row['occurrences']:,}"
    deep = max(rows, key=lambda r: r["key"].count("-"))
    assert module_cell(frame, deep["key"], "host_self_us") == fmt_us(deep["host_self_us"])
    assert frame.locator("[data-testid=module-flame] .flame-box").count() >= len(payload["rows"])
    shot(page, artifacts, "module_light")

    # Collapse all, expand one, expand all.
    frame.click("[data-testid=module-collapse-all]")
    wait_tree_rows(frame, len(payload["rows"]))
    parent = next(r for r in payload["rows"] if r["children"])
    frame.click(f"[data-testid=module-row][data-key='{parent['key']}'] "
                "[data-testid=module-toggle]")
    wait_tree_rows(frame, len(payload["rows"]) + len(parent["children"]))
    frame.click("[data-testid=module-expand-all]")
    wait_tree_rows(frame, len(rows))

    # Sort within each level by host total (descending): siblings are ordered, not the tree.
    frame.click("[data-testid=module-tree] [role=columnheader][data-col=host_total_us]")
    top = sorted(payload["rows"], key=lambda r: -r["host_total_us"])
    shown = [frame.get_attribute(f"[data-testid=module-row][aria-level='1'] >> nth={i}",
                                 "data-key") for i in range(len(top))]
    assert shown == [r["key"] for r in top]

    # Search keeps the matches and their ancestors.
    term = deep["name"]
    frame.fill("[data-testid=module-search]", term)
    matches = {r["key"] for r in rows if term.lower() in r["name"].lower()}
    keep = {k for m in matches for k in ("-".join(m.split("-")[:i + 1])
                                         for i in range(m.count("-") + 1))}
    wait_tree_rows(frame, len(keep))
    frame.fill("[data-testid=module-search]", "")
    wait_tree_rows(frame, len(rows))

    # Flame graph: click a root box to zoom into it, then a child; the breadcrumb follows.
    root = max(payload["flamegraph"], key=lambda n: n["value"])
    frame.click(f"[data-testid=module-flame] .flame-box[data-name='{root['name']}']")
    wait_text(frame, "[data-testid=flame-crumbs] .flame-current", root["name"])
    child = max(root["children"], key=lambda n: n["value"])
    frame.click(f"[data-testid=module-flame] .flame-box[data-name='{child['name']}']")
    wait_text(frame, "[data-testid=flame-crumbs] .flame-current", child["name"])
    assert root["name"] in frame.inner_text("[data-testid=flame-crumbs]")
    shot(page, artifacts, "module_flame_zoomed_light")
    frame.click("[data-testid=flame-reset]")
    assert frame.locator("[data-testid=flame-reset]").count() == 0


def test_module_dark(dark_page, views_tensorboard, artifacts):
    tb = views_tensorboard
    sel = view_selection(tb, need(tb, "cnn_bs32"), "Module")
    frame = open_view(dark_page, tb, "Module", **sel)
    frame.wait_for_selector("[data-testid=module-flame] .flame-box", timeout=TIMEOUT_MS)
    assert_dark(frame, "[data-testid=module-flame]")
    shot(dark_page, artifacts, "module_dark")


# -- Diff ----------------------------------------------------------------------------------


def diff_pair(tb: TensorBoard) -> tuple[dict[str, str], dict[str, str]]:
    base = view_selection(tb, need(tb, "cnn_bs32"), "Diff")
    exp = view_selection(tb, need(tb, "cnn_bs64"), "Diff")
    return base, {"exp_run": exp["run"], "exp_worker": exp["worker"], "exp_span": exp["span"]}


def shown_time(node: dict[str, Any]) -> str:
    """The time the Diff page shows by default: device time when either side ran any."""
    device = node["left"]["device_duration_us"] > 0 or node["right"]["device_duration_us"] > 0
    return "device_duration_us" if device else "host_duration_us"


def check_node(frame: Any, node: dict[str, Any]) -> None:
    key = shown_time(node)
    left, right = node["left"][key], node["right"][key]
    wait_text(frame, "[data-testid=diff-base-total]", fmt_duration(left))
    wait_text(frame, "[data-testid=diff-exp-total]", fmt_duration(right))
    assert frame.inner_text("[data-testid=diff-delta-total]") == \
        fmt_signed_duration(node["delta"][key])
    rows = frame.locator("[data-testid=diff-child]")
    assert rows.count() == len(node["children"])
    for child in node["children"]:
        row = frame.locator(f"[data-testid=diff-child][data-path='{child['path']}']")
        assert row.locator("[data-col=delta]").inner_text() == \
            fmt_signed_duration(child["delta"][key])
        assert row.locator("[data-col=base]").inner_text() == fmt_duration(child["left"][key])
    if not node["operator_deltas"]:
        assert frame.locator("[data-testid=diff-ops]").count() == 0
        return
    wait_rows(frame, "diff-ops", len(node["operator_deltas"]))
    key = node["operator_sort"]
    first = sorted(node["operator_deltas"], key=lambda r: -abs(r[key]))[0]
    assert table_column(frame, "diff-ops", "name")[0] == first["name"]


def test_diff_drill_down(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    base, exp = diff_pair(tb)
    root = tb.api("diff", **base, **exp)
    frame = open_view(page, tb, "Diff", **base, **exp)
    check_node(frame, root)
    assert frame.locator("[data-testid=diff-chart] canvas").count() == 1
    assert frame.inner_text("[data-testid=diff-current]") == "Whole span"
    assert frame.locator("[data-testid=diff-back]").count() == 0
    shot(page, artifacts, "diff_light")

    # Drill into the expandable child with the largest |delta|, then one level further.
    child = max((c for c in root["children"] if c["expandable"]),
                key=lambda c: abs(c["delta"][shown_time(root)]))
    frame.click(f"[data-testid=diff-child][data-path='{child['path']}'] [data-testid=diff-drill]")
    node = tb.api("diff", **base, **exp, path=child["path"])
    check_node(frame, node)
    page.wait_for_function(f"() => location.hash.includes('diff_path={child['path']}')")
    crumbs = frame.inner_text("[data-testid=diff-crumbs]")
    assert "Whole span" in crumbs
    grandchild = next((c for c in node["children"] if c["expandable"]), None)
    if grandchild is not None:
        frame.click(f"[data-testid=diff-child][data-path='{grandchild['path']}'] "
                    "[data-testid=diff-drill]")
        check_node(frame, tb.api("diff", **base, **exp, path=grandchild["path"]))
        shot(page, artifacts, "diff_drilled_light")
        frame.click("[data-testid=diff-back]")
        check_node(frame, node)
    frame.click("[data-testid=diff-back]")
    check_node(frame, root)
    assert frame.inner_text("[data-testid=diff-current]") == "Whole span"

    # Column groups: add Host self, remove Calls.
    frame.check("[data-testid=diff-groups] input[data-group=host_self_us]")
    header = "[data-testid=diff-ops] [role=columnheader][data-col=delta_host_self_us]"
    frame.wait_for_selector(header, timeout=TIMEOUT_MS)
    frame.uncheck("[data-testid=diff-groups] input[data-group=calls]")
    assert frame.locator("[data-testid=diff-ops] [role=columnheader][data-col=base_calls]"
                         ).count() == 0
    # An explicit sort, then back to |delta|.
    frame.click("[data-testid=diff-ops] [role=columnheader][data-col=delta_host_self_us]")
    values = [r["delta_host_self_us"] for r in root["operator_deltas"]]
    assert table_column(frame, "diff-ops", "delta_host_self_us")[0] == \
        fmt_signed_duration(max(values))
    frame.click("[data-testid=diff-ops-unsort]")
    check_node(frame, root)


def test_diff_experiment_selectors(page, views_tensorboard, artifacts):
    tb = views_tensorboard
    base, exp = diff_pair(tb)
    frame = open_view(page, tb, "Diff", **base)  # no experiment in the URL: the server's default
    frame.wait_for_selector("[data-testid=diff-selectors]", timeout=TIMEOUT_MS)
    proposed = tb.api("diff/default", **base)
    assert (proposed["run"], proposed["worker"], proposed["reason"]) == (
        base["run"], base["worker"], "other_span")  # the same worker's other span
    page.wait_for_function(f"() => location.hash.includes('exp_run={proposed['run']}') && "
                           f"location.hash.includes('exp_span={proposed['span']}')")
    assert frame.input_value("[data-testid=exp-run-select]") == proposed["run"]
    assert proposed["message"] in frame.inner_text("[data-testid=diff-default-hint]")
    # Pick the other sample run explicitly and compare.
    select(frame, "exp-run-select", exp["exp_run"])
    frame.wait_for_selector(f"[data-testid=exp-worker-select] option[value='{exp['exp_worker']}']",
                            state="attached", timeout=TIMEOUT_MS)
    check_node(frame, tb.api("diff", **base, **exp))
    text = frame.inner_text("[data-testid=diff-pair]")
    assert base["run"] in text and exp["exp_run"] in text
    # A worker's own span against itself: every delta is zero.
    select(frame, "exp-run-select", base["run"])
    same = {"exp_run": base["run"], "exp_worker": base["worker"], "exp_span": base["span"]}
    frame.wait_for_selector("[data-testid=exp-span-select]", timeout=TIMEOUT_MS)
    select(frame, "exp-span-select", base["span"])
    frame.wait_for_function(f"() => location.hash.includes('exp_span={base['span']}')")
    node = tb.api("diff", **base, **same)
    assert node["delta"]["total_duration_us"] == 0
    wait_text(frame, "[data-testid=diff-delta-total]", "0 us")


def test_diff_dark(dark_page, views_tensorboard, artifacts):
    tb = views_tensorboard
    base, exp = diff_pair(tb)
    frame = open_view(dark_page, tb, "Diff", **base, **exp)
    frame.wait_for_selector("[data-testid=diff-chart] canvas", timeout=TIMEOUT_MS)
    assert_dark(frame, "[data-testid=diff-chart]")
    shot(dark_page, artifacts, "diff_dark")


def test_views_tabs_and_url_state(page, views_tensorboard):
    """Every new view is a tab where the run offers it, and its state survives a reload."""
    tb = views_tensorboard
    run = need(tb, "ddp_gloo")
    frame = open_entry(page, tb, f"run={run}&view=Overview")
    views = tb.api("views", run=run)
    for view in ("Memory", "Distributed", "Module", "Diff"):
        assert view in views
        frame.click(f"[data-testid=tab-{view}]")
        frame.wait_for_selector(f"[data-testid=tab-{view}][aria-selected=true]")
        assert frame.locator("[data-testid=unsupported-view]").count() == 0
    frame.click("[data-testid=tab-Memory]")
    frame.wait_for_selector("[data-testid=mem-curve] canvas", timeout=TIMEOUT_MS)
    page.reload()
    page.wait_for_selector("[data-testid=mem-curve] canvas", timeout=TIMEOUT_MS)
    assert page.get_attribute("[data-testid=tab-Memory]", "aria-selected") == "true"
