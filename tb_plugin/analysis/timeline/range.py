"""Aggregate of a time range of the Trace view (like the old viewer's and Perfetto's area
selection): per event name, how many events overlap the range on the chosen tracks, their wall
time inside the range and their self time inside it.

Computed from the timeline index (`timeline_index.py`) with a few array operations: per row of
the chosen tracks, two `searchsorted` calls find the overlapping events; each event's time is
clipped to the range; an event's parent is the event of the row above (same track) that starts
at or before it (rows are nested and disjoint, so that is exact), and self time = clipped time
minus the clipped time of the direct children.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from ...ingest.schema import TraceTable
from ...views.trace.payload import TimelineRangePayload
from .index import build_timeline_index, concat_ranges


def build_timeline_range(table: TraceTable, start_us: float, end_us: float,
                         tracks: Optional[Sequence[int]] = None) -> TimelineRangePayload:
    """Counts, total and self time (us, inside [start_us, end_us]) by event name.

    ```
    {"start_us", "end_us", "tracks": [track ids], "events": int,
     "rows": [{"name", "count", "total_us", "self_us", "avg_us"}]}  # by total_us descending
    ```
    `tracks` are ids of `/timeline`'s `tracks` (all tracks when None). Raises ValueError for an
    empty or inverted range or an unknown track id.
    """
    index = build_timeline_index(table)
    if not (math.isfinite(start_us) and math.isfinite(end_us)) or end_us <= start_us:
        raise ValueError(f"bad range [{start_us}, {end_us}]: need start_us < end_us")
    n_tracks = len(index.tracks)
    chosen = np.arange(n_tracks) if tracks is None else np.unique(np.asarray(tracks, np.int64))
    unknown = chosen[(chosen < 0) | (chosen >= n_tracks)]
    if unknown.size:
        raise ValueError(f"no track {int(unknown[0])}: track ids are 0 to {n_tracks - 1}")
    ws, we = index.ticks(start_us), index.ticks(end_us)
    rows = concat_ranges(index.track_rows[chosen], np.diff(index.track_rows)[chosen])
    base = rows * index.span
    lo = np.searchsorted(index.end_key, base + max(math.ceil(ws), 0), side="left")
    hi = np.searchsorted(index.start_key, base + min(math.floor(we), index.span - 1),
                         side="right")
    counts = np.maximum(hi - lo, 0)
    pos = concat_ranges(lo, counts)
    row = np.repeat(rows, counts)
    start = index.start_key[pos] - row * index.span
    end = index.end_key[pos] - row * index.span
    inside = np.clip(np.minimum(end, we) - np.maximum(start, ws), 0, None)
    self_ticks = inside.astype(np.float64)
    child = index.row_depth[row] > 0
    parent = np.searchsorted(index.start_key, (row[child] - 1) * index.span + start[child],
                             side="right") - 1
    # pos is sorted (rows ascending, positions within rows) and a parent's position is below its
    # child's, so `at` is at most the child's own index in pos: never past its end
    at = np.searchsorted(pos, parent)
    found = pos[at] == parent
    np.subtract.at(self_ticks, at[found], inside[child][found])
    scale = index.tick_ns / 1000.0
    return {"start_us": float(start_us), "end_us": float(end_us),
            "tracks": chosen.tolist(), "events": int(pos.size),
            "rows": _by_name(table, index.name[pos], inside * scale,
                             np.maximum(self_ticks, 0) * scale)}


def _by_name(table: TraceTable, codes: np.ndarray, total: np.ndarray, own: np.ndarray
             ) -> list[dict[str, Any]]:
    if codes.size == 0:
        return []
    names, inverse = np.unique(codes, return_inverse=True)
    count = np.bincount(inverse)
    total_us = np.bincount(inverse, weights=total)
    self_us = np.bincount(inverse, weights=own)
    labels = table.events["name"].cat.categories.astype(str).to_numpy(dtype=object)
    text = np.where(names >= 0, labels[np.maximum(names, 0)], "")
    order = np.lexsort((text, -total_us))
    return [{"name": str(text[i]), "count": int(count[i]),
             "total_us": round(float(total_us[i]), 3), "self_us": round(float(self_us[i]), 3),
             "avg_us": round(float(total_us[i] / count[i]), 3)} for i in order.tolist()]
