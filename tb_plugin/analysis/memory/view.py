"""Memory view (spec 1.6, 3.11): per-device curves, alloc/free pairs, per-operator statistics,
peaks against device capacity and growth (leak) flags, from the `[memory]` instants of one trace.

Records and their attribution are in `memory_records`, curves in `memory_curves`, peaks and leaks
in `memory_leaks`. Deliberate difference from the reference: operator `calls` counts every
operator node overlapping the range (the reference skipped the subtrees of nodes no record
reached, which only ever lowered the count).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ...views.memory.payload import MemoryPayload
from ..optree import OpTree, build_op_tree
from .curves import DEFAULT_MAX_POINTS, curve_json
from .leaks import leaks, peaks
from .records import default_device, devices_of, event_rows, in_window, memory_records, records_json


class UnknownDeviceError(KeyError):
    """The requested device has no memory records (the server answers 404)."""


_STAT_COLUMNS = ("self_increase_bytes", "self_alloc_bytes", "self_alloc_count",
                 "increase_bytes", "alloc_bytes", "alloc_count")


def operator_stats(table: TraceTable, start_us: Optional[float] = None,
                   end_us: Optional[float] = None) -> pd.DataFrame:
    """Per (device, operator name): calls and self/inclusive increase, allocation size and count
    over the records in [start, end] (spec 3.11). Rows with all six metrics zero are dropped."""
    records = memory_records(table)
    columns = ["device", "name", "calls", *_STAT_COLUMNS]
    if len(records) == 0:
        return pd.DataFrame({c: [] for c in columns})
    tree = build_op_tree(table)
    nodes = _window_operators(tree, start_us, end_us)
    names = pd.Series(tree.names[nodes])
    calls = names.value_counts()
    in_range = in_window(records["ts"].to_numpy(), start_us, end_us) & (records["op"] >= 0)
    in_range &= records["device"].notna().to_numpy()
    frames = [_device_stats(tree, records[in_range & (records["device"] == d)], nodes, names, d)
              for d in devices_of(records[in_range])]
    if not frames:
        return pd.DataFrame({c: [] for c in columns})
    stats = pd.concat(frames, ignore_index=True)
    stats["calls"] = calls.reindex(stats["name"]).fillna(0).astype(np.int64).to_numpy()
    return stats[columns].sort_values(["device", "name"], kind="stable").reset_index(drop=True)


def _window_operators(tree: OpTree, start: Optional[float], end: Optional[float]) -> np.ndarray:
    """Operator nodes overlapping the range (the reference's inclusive node filter)."""
    keep = tree.is_operator.copy()
    if start is not None:
        keep &= ~(tree.end < start)
    if end is not None:
        keep &= ~(tree.start > end)
    return np.flatnonzero(keep)


def _device_stats(tree: OpTree, records: pd.DataFrame, nodes: np.ndarray, names: pd.Series,
                  device: str) -> pd.DataFrame:
    """Self metrics from the node's own records; inclusive ones from its pre-order slice."""
    order = np.argsort(records["op"].to_numpy(), kind="stable")
    owner = records["op"].to_numpy()[order]
    size = records["bytes"].to_numpy()[order]
    alloc = size > 0
    prefix = {
        "increase_bytes": np.concatenate(([0.0], np.cumsum(size))),
        "alloc_bytes": np.concatenate(([0.0], np.cumsum(np.where(alloc, size, 0.0)))),
        "alloc_count": np.concatenate(([0], np.cumsum(alloc))),
    }
    self_lo = np.searchsorted(owner, nodes, side="left")
    self_hi = np.searchsorted(owner, nodes, side="right")
    sub_hi = np.searchsorted(owner, tree.subtree_end[nodes], side="left")
    data: dict[str, Any] = {"device": device, "name": names.to_numpy()}
    for metric, acc in prefix.items():
        data[f"self_{metric}"] = acc[self_hi] - acc[self_lo]
        data[metric] = acc[sub_hi] - acc[self_lo]
    per_node = pd.DataFrame(data)
    grouped = per_node.groupby(["device", "name"], sort=False, as_index=False).sum()
    metrics = grouped[list(_STAT_COLUMNS)].to_numpy()
    return grouped[(metrics != 0).any(axis=1)]


def operator_rows(table: TraceTable, device: Optional[str] = None,
                  start_us: Optional[float] = None, end_us: Optional[float] = None
                  ) -> list[dict[str, Any]]:
    stats = operator_stats(table, start_us, end_us)
    if device is not None:
        stats = stats[stats["device"] == device]
    stats = stats.astype({c: np.int64 for c in _STAT_COLUMNS})
    return records_json(stats)


def build_memory(table: TraceTable, device: Optional[str] = None,
                 start_us: Optional[float] = None, end_us: Optional[float] = None,
                 max_points: int = DEFAULT_MAX_POINTS, max_events: Optional[int] = None
                 ) -> MemoryPayload:
    """The memory view of one trace; times are trace us, sizes bytes. `device` restricts the
    curves and tables to one device (`UnknownDeviceError` if it has no records); [start_us,
    end_us] selects a time range; `max_events` caps the alloc/free table (largest first).

    {"devices": [names], "default_device", "time_origin_us", "range_us": [start, end],
     "curves": {dev: {"t_us", "allocated", "reserved", "approximate"}},
     "peaks": {dev: {"bytes", "t_us", "reserved_bytes", "capacity_bytes",
                     "fraction_of_capacity", "approximate", "end_bytes"}},
     "events": {"rows": [{device, op, bytes, alloc_t_us, free_t_us, duration_us}], "total",
                "truncated"},
     "operators": {"rows": [{device, name, calls, self_increase_bytes, self_alloc_bytes,
                             self_alloc_count, increase_bytes, alloc_bytes, alloc_count}]},
     "leaks": [{device, kind: "growth", steps, allocated_at_step_end, growth_bytes,
                per_step_bytes, noise_bytes, approximate, top_ops}] (see `memory_leaks`),
     "messages": [str]}
    """
    records = memory_records(table)
    devices = devices_of(records)
    if device is not None and device not in devices:
        raise UnknownDeviceError(device)
    shown = [device] if device is not None else devices
    events, event_count = event_rows(table, device, start_us, end_us, max_events)
    return {
        "devices": devices,
        "default_device": default_device(devices),
        "time_origin_us": _time_origin(table),
        "range_us": [start_us, end_us],
        "curves": {d: curve_json(records, d, start_us, end_us, max_points) for d in shown},
        "peaks": peaks(table, shown, end_us),
        "events": {"rows": events, "total": event_count, "truncated": len(events) < event_count},
        "operators": {"rows": operator_rows(table, device, start_us, end_us)},
        "leaks": leaks(table, shown),
        "messages": _messages(records),
    }


def _time_origin(table: TraceTable) -> Optional[float]:
    """The profiler start (earliest event or memory record), for relative time axes."""
    starts = [table.events["ts"].min(), table.memory["ts"].min()]
    finite = [float(s) for s in starts if s is not None and np.isfinite(s)]
    return min(finite) if finite else None


def _messages(records: pd.DataFrame) -> list[str]:
    messages = []
    if len(records) == 0:
        messages.append("The trace has no memory records (profile_memory=True records them).")
        return messages
    if records["addr"].isna().all():
        messages.append("Memory records have no addresses (PyTorch < 1.10): allocation/release "
                        "pairs are unavailable.")
    if records["total_allocated"].isna().all():
        messages.append("Memory records have no totals (PyTorch < 1.10): curves are rebuilt "
                        "from allocation sizes and start at zero.")
    staled = int((records["op"] < 0).sum())
    if staled:
        messages.append(f"{staled} of {len(records)} memory records happened outside any "
                        "operator and count in no operator's statistics.")
    return messages
