"""The single entry point from parsed traces to a view's JSON.

`build_view(table, view, **options)` for views of one trace, `build_distributed_view(tables)` for
all workers of a span, `build_diff_view(base, exp, path)` for two traces. The CLI, the server and
the benchmark all go through here, so a view is added in one place, and `view_rows(view,
payload)` picks the table a CSV export of a payload holds.
View modules are imported on first use: a view that fails to import or compute costs only itself.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..ingest.memory_export import RawTimeline
from ..ingest.schema import TraceTable
from ..load import load_memory_export
from ..payloads import DiffPayload, DistributedPayload

ViewBuilder = Callable[..., dict[str, Any]]


def _overview(table: TraceTable) -> dict[str, Any]:
    from .overview import build_overview

    return build_overview(table)


def _operators(table: TraceTable, **options: Any) -> dict[str, Any]:
    from .operators import build_operators

    return build_operators(table, **options)  # group_by=...


def _kernels(table: TraceTable, **options: Any) -> dict[str, Any]:
    from .kernels import build_kernels

    return build_kernels(table, **options)  # group_by=...


def _timeline(table: TraceTable, **options: Any) -> dict[str, Any]:
    from .timeline import build_timeline

    return build_timeline(table, **options)  # start_us, end_us, width; ValueError if bad


def _timeline_event(table: TraceTable, event_id: int) -> dict[str, Any]:
    from .timeline import event_details

    return event_details(table, event_id)  # KeyError for an unknown id


def _timeline_search(table: TraceTable, query: str, **options: Any) -> dict[str, Any]:
    from .timeline import search_timeline

    return search_timeline(table, query, **options)  # limit, start_us


def _memory(table: TraceTable, **options: Any) -> dict[str, Any]:
    from .memory import build_memory

    return build_memory(table, **options)  # device (UnknownDeviceError), start_us, end_us


def _memory_timeline(table: Optional[TraceTable], source: Any, **options: Any
                     ) -> dict[str, Any]:
    """The memory-timeline export `source` (a FileRef or path, read through the cache, or its
    records); on the trace's clock and steps when the trace of the same span is given, else on
    its own clock."""
    from .memory_timeline import build_memory_timeline, build_memory_timeline_for

    raw = source if isinstance(source, RawTimeline) else load_memory_export(source)
    if table is None:
        return build_memory_timeline(raw, **options)
    return build_memory_timeline_for(table, raw, **options)


def _modules(table: TraceTable) -> dict[str, Any]:
    from .modules import build_modules

    return build_modules(table)


#: view name -> builder(table, **options). Options are view-specific (e.g. `group_by`).
VIEWS: dict[str, ViewBuilder] = {
    "overview": _overview,
    "operators": _operators,
    "kernels": _kernels,
    "timeline": _timeline,
    "timeline_event": _timeline_event,
    "timeline_search": _timeline_search,
    "memory": _memory,
    "memory_timeline": _memory_timeline,
    "modules": _modules,
}
#: Views over several traces: `build_distributed_view`, `build_diff_view`.
MULTI_VIEWS = ("distributed", "diff")


def build_view(table: Optional[TraceTable], view: str, **options: Any) -> dict[str, Any]:
    """JSON-ready data of one view. Unknown views raise `KeyError` naming the known ones;
    options a view does not take raise `TypeError`. Only `memory_timeline` accepts no table."""
    try:
        builder = VIEWS[view]
    except KeyError:
        known = ", ".join([*VIEWS, *MULTI_VIEWS])
        raise KeyError(f"unknown view {view!r}; known views: {known}") from None
    return builder(table, **options)


def build_distributed_view(tables: dict[str, TraceTable],
                           skipped: Optional[dict[str, str]] = None) -> DistributedPayload:
    """The distributed view of one span over the usable workers in `tables`; `skipped` maps
    the workers left out (broken, or without that span) to why, reported in `messages` and
    `skipped`."""
    from .distributed import build_distributed

    payload = build_distributed(tables)
    skipped = dict(sorted((skipped or {}).items()))
    payload["messages"] = [f"{w}: left out: {why}" for w, why in skipped.items()] + list(
        payload.get("messages") or [])
    payload["skipped"] = skipped
    return payload


def build_diff_view(base: TraceTable, exp: TraceTable, path: str = "0") -> DiffPayload:
    """One node of the diff of `base` and `exp` (UnknownDiffPathError, a KeyError, if none)."""
    from .diff import build_diff

    return build_diff(base, exp, path)


# -- tables for CSV -------------------------------------------------------------------------------


def view_rows(view: str, payload: Any) -> Optional[list[dict[str, Any]]]:
    """The rows a CSV export of `payload` holds, or None when the payload has no table."""
    if not isinstance(payload, dict):
        return None
    pick = _ROWS.get(view)
    if pick is not None:
        return pick(payload)
    rows = payload.get("rows")
    return rows if isinstance(rows, list) else None


def _overview_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"step": s["name"], "total_us": s["total_us"], **s["breakdown_us"]}
            for s in payload.get("steps") or []]


def _memory_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-operator statistics, then the allocation/free pairs, with a `table` column."""
    rows = [{"table": "operators", **r} for r in payload["operators"]["rows"]]
    return rows + [{"table": "events", **r} for r in payload["events"]["rows"]]


def _memory_timeline_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    series = payload["series"]
    return [{"t_us": t, **{c: series[c][i] for c in payload["categories"]},
             "total": payload["total"][i]} for i, t in enumerate(payload["t_us"])]


def _module_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The module tree, depth first, one row per module with its key and depth."""
    out: list[dict[str, Any]] = []

    def walk(rows: list[dict[str, Any]], depth: int) -> None:
        for row in rows:
            out.append({"depth": depth, **{k: v for k, v in row.items() if k != "children"}})
            walk(row.get("children") or [], depth + 1)

    walk(payload.get("rows") or [], 0)
    return out


def _distributed_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"worker": worker, **row} for worker, table in sorted(payload["comm_ops"].items())
            for row in table["rows"]]


_ROWS: dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]] = {
    "overview": _overview_rows,
    "timeline_search": lambda p: p["matches"],
    "memory": _memory_rows,
    "memory_timeline": _memory_timeline_rows,
    "modules": _module_rows,
    "distributed": _distributed_rows,
    "diff": lambda p: p["operator_deltas"],
}
