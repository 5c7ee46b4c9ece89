"""The single entry point from a parsed trace to a view's JSON: `build_view(table, view, ...)`.

The CLI, the server and the benchmark all go through here, so a view is added in one place.
View modules are imported on first use: a view that fails to import or compute costs only itself.
"""

from __future__ import annotations

from typing import Any, Callable

from ..ingest.schema import TraceTable

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


#: view name -> builder(table, **options). Options are view-specific (e.g. `group_by`).
VIEWS: dict[str, ViewBuilder] = {
    "overview": _overview,
    "operators": _operators,
    "kernels": _kernels,
}


def build_view(table: TraceTable, view: str, **options: Any) -> dict[str, Any]:
    """JSON-ready data of one view. Unknown views raise `KeyError` naming the known ones;
    options a view does not take raise `TypeError`."""
    try:
        builder = VIEWS[view]
    except KeyError:
        raise KeyError(f"unknown view {view!r}; known views: {', '.join(VIEWS)}") from None
    return builder(table, **options)
