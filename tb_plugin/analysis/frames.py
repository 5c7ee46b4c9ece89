"""DataFrames of the views that are not tables of their own module (steps, memory, modules,
collectives), for the public Python API (`tb_plugin.api`).

Each frame is made from the very result its view's builder uses (the memoised breakdown, the
memory pairs and statistics, the module payload, the distributed payload), so a frame and the
UI never disagree: nothing here computes a number a second time. Column names carry their unit
(`_us`: microseconds on the trace clock, `_bytes`: bytes).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from .breakdown import CATEGORIES, compute_breakdown
from .distributed.run import build_distributed
from .memory.records import devices_of, event_rows, memory_records
from .memory.view import UnknownDeviceError, operator_stats
from .modules import build_modules

#: Alloc/free pairs (the Memory view's event table): column -> dtype.
MEMORY_EVENT_COLUMNS = {"device": object, "op": object, "bytes": np.int64,
                        "alloc_t_us": np.float64, "free_t_us": np.float64,
                        "duration_us": np.float64}
_MEMORY_STATS = ("self_increase_bytes", "self_alloc_bytes", "self_alloc_count",
                 "increase_bytes", "alloc_bytes", "alloc_count")
#: Module rows: where each sits in the tree, before the payload's own fields.
MODULE_TREE_COLUMNS = ("key", "parent_key", "depth")


def category_column(category: str) -> str:
    """The step frame's column of a breakdown category: "CPU Exec" -> "cpu_exec_us"."""
    return category.lower().replace(" ", "_") + "_us"


def step_frame(table: TraceTable) -> pd.DataFrame:
    """One row per step (the Overview's step-time breakdown): step name, start_us, end_us,
    total_us and one `<category>_us` column per breakdown category (they sum to total_us)."""
    breakdown = compute_breakdown(table)
    steps = breakdown.steps
    data: dict[str, Any] = {"step": list(steps.names), "start_us": steps.starts,
                            "end_us": steps.ends, "total_us": breakdown.totals}
    for category in CATEGORIES:
        data[category_column(category)] = breakdown.costs[category]
    return pd.DataFrame(data)


def memory_devices(table: TraceTable) -> list[str]:
    """Devices with memory records, in display order (CPU, GPU0, GPU1, ...)."""
    return devices_of(memory_records(table))


def _check_device(table: TraceTable, device: Optional[str]) -> None:
    if device is not None and device not in memory_devices(table):
        known = ", ".join(memory_devices(table)) or "none"
        raise UnknownDeviceError(f"no memory records of device {device!r}; devices: {known}")


def memory_event_frame(table: TraceTable, device: Optional[str] = None,
                       start_us: Optional[float] = None, end_us: Optional[float] = None
                       ) -> pd.DataFrame:
    """The Memory view's allocation/release pairs (all of them, in time order): device, op,
    bytes, alloc_t_us, free_t_us (NaN while still allocated, or for a release of an unknown
    allocation), duration_us. `device` / [start_us, end_us] select as the view does."""
    _check_device(table, device)
    rows, _total = event_rows(table, device, start_us, end_us)
    return pd.DataFrame(rows, columns=list(MEMORY_EVENT_COLUMNS)).astype(MEMORY_EVENT_COLUMNS)


def memory_operator_frame(table: TraceTable, device: Optional[str] = None,
                          start_us: Optional[float] = None, end_us: Optional[float] = None
                          ) -> pd.DataFrame:
    """The Memory view's per-operator statistics: device, name, calls, self and inclusive
    increase (bytes), allocated bytes and allocation count, over [start_us, end_us]."""
    _check_device(table, device)
    stats = operator_stats(table, start_us, end_us)
    if device is not None:
        stats = stats[stats["device"] == device]
    return stats.astype({c: np.int64 for c in ("calls", *_MEMORY_STATS)}).reset_index(drop=True)


def module_frame(table: TraceTable) -> pd.DataFrame:
    """The Module view's rows, depth first: key ("0-1"), parent_key (missing at the top), depth,
    then the payload's fields (name, module_id, occurrences, operators, host/device total and
    self us, avg_duration_us, and backward_*_us / module_type / missing_calls where the view
    has them). Empty when the trace has no module events."""
    records: list[dict[str, Any]] = []

    def walk(rows: list[dict[str, Any]], parent: Optional[str], depth: int) -> None:
        for row in rows:
            fields = {k: v for k, v in row.items() if k != "children"}  # "key" stays first
            records.append({"key": row["key"], "parent_key": parent, "depth": depth, **fields})
            walk(row["children"], row["key"], depth + 1)

    walk(build_modules(table)["rows"], None, 0)
    frame = pd.DataFrame(records, columns=None if records else list(MODULE_TREE_COLUMNS))
    if "missing_calls" in frame:  # only rows with missing calls carry the key
        frame["missing_calls"] = frame["missing_calls"].fillna(0).astype(np.int64)
    return frame


def collective_frame(tables: dict[str, TraceTable]) -> pd.DataFrame:
    """The Distributed view's communication-op statistics over the workers of one span: one row
    per (worker, collective), workers sorted, collectives in first-seen order: calls,
    total/avg bytes, total/avg latency and transfer time (us, 3 decimals as the view)."""
    comm_ops = build_distributed(tables)["comm_ops"]
    return pd.DataFrame([{"worker": worker, **row} for worker in sorted(comm_ops)
                         for row in comm_ops[worker]["rows"]],
                        columns=_COLLECTIVE_COLUMNS)


_COLLECTIVE_COLUMNS = ["worker", "name", "calls", "total_bytes", "avg_bytes", "total_latency_us",
                       "avg_latency_us", "total_transfer_us", "avg_transfer_us", "unmatched_calls"]
