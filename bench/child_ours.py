"""Measure torch-prof (this repo) on one trace: parse to a TraceTable, then build the views.

Runs with the project's venv and ``PYTHONPATH`` set to the repo root by the harness. Our on-disk
cache is disabled (``use_cache=False``) so every run pays the full parse, like the old plugin.

The API is being written alongside this benchmark, so the child degrades honestly:
``load_trace`` missing -> ``status: pending``; ``build_view`` missing -> parse is timed alone
and the result says ``mode: parse only``. Usage: ``python child_ours.py TRACE``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

from childutil import emit, rss_mb, timed

VIEWS = ("overview", "operators", "kernels")


def import_api() -> tuple[Callable[..., Any] | None, Callable[..., Any] | None, str]:
    """Import whatever of the API exists yet; the note says what is missing and why."""
    try:
        from tb_plugin.load import load_trace
    except ImportError as exc:
        return None, None, f"load_trace not importable: {exc}"
    try:
        from tb_plugin.views.registry import build_view
    except ImportError as exc:
        return load_trace, None, f"build_view not importable: {exc}"
    return load_trace, build_view, ""


def _row_count(table: Any) -> int | None:
    """Rows in the parsed table, if it exposes a length (a cross-check on the event count)."""
    try:
        return len(table)
    except TypeError:
        return None


def load(path: str, load_trace: Callable[..., Any], build_view: Callable[..., Any] | None) -> dict:
    """Parse, then (when available) build every view; parse and analysis are timed separately."""
    start = time.perf_counter()
    table = load_trace(path, use_cache=False)
    parsed = time.perf_counter()
    if build_view is not None:
        for view in VIEWS:
            build_view(table, view)
    done = time.perf_counter()
    return {
        "mode": "full" if build_view is not None else "parse only",
        "parse_seconds": round(parsed - start, 3),
        "analysis_seconds": round(done - parsed, 3),
        "rows": _row_count(table),
    }


def main() -> None:
    """Entry point: measure one file and print the JSON result line."""
    path = sys.argv[1]
    load_trace, build_view, note = import_api()
    if load_trace is None:
        emit({"status": "pending", "note": note})
        return
    result = timed(lambda: load(path, load_trace, build_view), rss_mb())
    if note:
        result["note"] = note
    emit(result)


if __name__ == "__main__":
    main()
