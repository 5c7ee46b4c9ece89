"""Interval arithmetic on sorted interval lists, vectorised with numpy.

A range list is a pair of float arrays `(starts, ends)` of half-open intervals `[start, end)`.
"Merged" means sorted by start, pairwise disjoint and non-empty; `merge` produces that form and
`intersect`/`subtract` return it. Every function is O((n + m) log) numpy work, no Python loop per
interval, so whole-trace role ranges (millions of events) stay cheap.
"""

from __future__ import annotations

import numpy as np

Ranges = tuple[np.ndarray, np.ndarray]


def empty() -> Ranges:
    return np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)


def merge(starts: np.ndarray, ends: np.ndarray) -> Ranges:
    """Sorted union of possibly overlapping intervals; touching intervals are joined.

    A new merged interval starts wherever an interval begins after the running maximum of all
    earlier ends, so the union is a cumulative max plus a split: no Python loop.
    """
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    keep = ends > starts  # empty intervals add nothing to a union
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return empty()
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new_group = np.empty(starts.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new_group)
    last = np.append(first[1:] - 1, starts.size - 1)
    return starts[first], reach[last]


def is_merged(ranges: Ranges) -> bool:
    starts, ends = ranges
    return bool(np.all(ends > starts) and np.all(starts[1:] >= ends[:-1]))


def _merged(ranges: Ranges) -> Ranges:
    """`ranges` itself when already merged (an O(n) check), else its merge."""
    starts = np.asarray(ranges[0], dtype=np.float64)
    ends = np.asarray(ranges[1], dtype=np.float64)
    return (starts, ends) if is_merged((starts, ends)) else merge(starts, ends)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """a ∩ b. Each interval of `a` meets a contiguous run of `b` found by two searchsorteds."""
    a_s, a_e = _merged(a)
    b_s, b_e = _merged(b)
    if a_s.size == 0 or b_s.size == 0:
        return empty()
    first = np.searchsorted(b_e, a_s, side="right")  # first b ending after a starts
    stop = np.searchsorted(b_s, a_e, side="left")  # b intervals starting before a ends
    counts = np.maximum(stop - first, 0)
    total = int(counts.sum())
    if total == 0:
        return empty()
    a_index = np.repeat(np.arange(a_s.size), counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    b_index = np.repeat(first, counts) + offsets
    starts = np.maximum(a_s[a_index], b_s[b_index])
    ends = np.minimum(a_e[a_index], b_e[b_index])
    keep = ends > starts
    return starts[keep], ends[keep]


def complement(ranges: Ranges) -> Ranges:
    """The gaps of a merged list over the whole real line (with ±inf at both ends)."""
    starts, ends = _merged(ranges)
    gap_starts = np.concatenate(([-np.inf], ends))
    gap_ends = np.concatenate((starts, [np.inf]))
    keep = gap_ends > gap_starts
    return gap_starts[keep], gap_ends[keep]


def subtract(a: Ranges, b: Ranges) -> Ranges:
    """a − b, as a ∩ complement(b)."""
    a = _merged(a)
    if a[0].size == 0:
        return empty()
    return intersect(a, complement(b))


def total_length(ranges: Ranges) -> float:
    """Summed length; the caller merges first when overlaps must not count twice."""
    starts, ends = ranges
    return float(np.sum(np.asarray(ends) - np.asarray(starts)))


def contains(ranges: Ranges, points: np.ndarray) -> np.ndarray:
    """Per point, whether a merged range holds it (half-open: its start yes, its end no)."""
    starts, ends = _merged(ranges)
    points = np.asarray(points, dtype=np.float64)
    k = np.searchsorted(starts, points, side="right") - 1
    return (k >= 0) & (points < ends[np.maximum(k, 0)]) if starts.size else \
        np.zeros(points.size, dtype=bool)


def clip(ranges: Ranges, lo: float, hi: float) -> Ranges:
    return intersect(ranges, (np.array([lo], dtype=np.float64), np.array([hi], dtype=np.float64)))


def length_in_windows(ranges: Ranges, win_starts: np.ndarray, win_ends: np.ndarray) -> np.ndarray:
    """|ranges ∩ [win_start, win_end)| for every window, windows may overlap or be unsorted.

    Uses the covered-length prefix function F(x) = |ranges ∩ (-inf, x)|, so each window costs one
    searchsorted: F(end) − F(start).
    """
    starts, ends = _merged(ranges)
    win_starts = np.asarray(win_starts, dtype=np.float64)
    win_ends = np.asarray(win_ends, dtype=np.float64)
    if starts.size == 0 or win_starts.size == 0:
        return np.zeros(win_starts.size, dtype=np.float64)
    lengths = ends - starts
    before = np.concatenate(([0.0], np.cumsum(lengths)))  # covered length before interval k

    def covered_until(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(starts, x, side="right") - 1  # last interval starting at or before x
        kk = np.maximum(k, 0)
        partial = before[kk] + np.clip(x - starts[kk], 0.0, lengths[kk])
        return np.where(k >= 0, partial, 0.0)

    result = covered_until(win_ends) - covered_until(win_starts)
    return np.maximum(result, 0.0)
