"""The timeline's per-table index: events laid out in tracks and rows, plus merge levels.

Built once per table (`build_timeline_index`, memoised) so that every viewport request is a few
`searchsorted` calls over sorted int64 keys and work proportional to what is visible.

Layout. A *track* is one (pid, tid): a CPU thread, a GPU stream, or another lane such as the
profiler span. Each track's events are nested into *rows* (depth 0 = outermost). Every event of
every row is stored once, in one set of arrays ordered by (row, start) — the *positions*. Times
are integer clock ticks (1 ns unless the trace is very long) from the trace start `t0_us`, and
each position has two sort keys, `row * span + start` and `row * span + end`, so one
`searchsorted` finds, for all rows at once, the events that overlap a time window.

Within a row events are disjoint (a child that outlasts its parent, typically by a nanosecond of
rounding, is clamped to the parent's end), so both starts and ends are sorted along a row: the
first event ending after the window start is found directly, including events that start
before the window.

Merge levels. Two neighbours (in a row) are merged into one block at pixel size `px` when both
are narrower than `px` and the gap between them is too: the pair's threshold
`gap[i] = max(dur[i-1], dur[i], start[i] - end[i-1])` says when (`gap < px`). A level stores the
blocks for a bin size `b` as the positions where blocks begin; a request at pixel size
`px >= b` starts from that level and only merges further, with the same threshold, so the answer
is exactly what merging the raw events would give, at a cost bounded by the pixels on screen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import DEVICE_KINDS, Kind, TraceTable
from ..memo import memoised
from ..nesting import nest

#: Phases drawn as slices; instants ("i"/"I") become zero-length slices. Counters ("C") and
#: anything else are not timeline slices.
SLICE_PHASES = ("X",)
INSTANT_PHASES = ("i", "I")
GPU_KINDS = (*DEVICE_KINDS, Kind.GPU_USER_ANNOTATION)
#: Track groups, in display order: CPU threads, then GPU streams, then named lanes ("Spans").
CPU, GPU, OTHER = 0, 1, 2
GROUP_NAMES = {CPU: "cpu", GPU: "gpu", OTHER: "other"}
#: A merge level is kept only when it has at most this share of the previous kept level's items.
LEVEL_SHRINK = 0.5
_INT64_ROOM = 2**62


@dataclass
class TimelineIndex:
    """See the module docstring. Arrays indexed by position unless said otherwise."""

    t0_us: float  # trace time of tick 0
    tick_ns: int  # clock resolution
    span: int  # key stride per row; every time is in [0, span)
    tracks: list[dict[str, Any]]  # JSON-ready descriptors, display order (index = track id)
    row_track: np.ndarray  # per row
    row_depth: np.ndarray  # per row
    row_offsets: np.ndarray  # per row + 1: positions of row r are [row_offsets[r], [r+1])
    track_rows: np.ndarray  # per track + 1: rows of track t are [track_rows[t], [t+1])
    start_key: np.ndarray  # int64 row * span + start tick
    end_key: np.ndarray  # int64 row * span + end tick (clamped into the parent)
    gap: np.ndarray  # float64 merge threshold of the pair (position - 1, position); inf: row start
    event: np.ndarray  # int64 row in table.events
    name: np.ndarray  # int32 code into table.events["name"].cat.categories
    position: np.ndarray  # int64 per table.events row: its position, or -1 (not drawn)
    levels: list[tuple[float, np.ndarray]]  # (bin in ticks, block bounds), finest first
    clamped: int = 0  # events whose end was clamped into their parent
    flows: dict[str, np.ndarray] = field(default_factory=dict)  # see _attach_flows
    flow_cats: list[str] = field(default_factory=list)
    end_tick: int = 0  # last event end

    @property
    def n_rows(self) -> int:
        return len(self.row_track)

    def us(self, ticks: Any) -> Any:
        """Ticks -> trace time in us."""
        return self.t0_us + np.asarray(ticks, dtype=np.float64) * (self.tick_ns / 1000.0)

    def ticks(self, us: float) -> float:
        return (us - self.t0_us) * 1000.0 / self.tick_ns

    def row_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.row_offsets, positions, side="right") - 1

    def starts(self, positions: np.ndarray) -> np.ndarray:
        """Start ticks of positions (keys minus their row's base)."""
        return self.start_key[positions] - self.row_of(positions) * self.span

    def ends(self, positions: np.ndarray) -> np.ndarray:
        return self.end_key[positions] - self.row_of(positions) * self.span


def build_timeline_index(table: TraceTable) -> TimelineIndex:
    """The table's timeline index, computed once per table."""
    return memoised(table, "timeline_index", lambda: _build_index(table))


def _build_index(table: TraceTable) -> TimelineIndex:
    events = table.events
    rows, start_us, end_us = _drawable(events)
    t0 = float(start_us.min()) if rows.size else 0.0
    extent_us = float(end_us.max() - t0) if rows.size else 0.0
    tick_ns = _tick_ns(extent_us, rows.size)
    start = np.rint((start_us - t0) * 1000.0 / tick_ns).astype(np.int64)
    end = np.maximum(np.rint((end_us - t0) * 1000.0 / tick_ns).astype(np.int64), start)
    span = int(end.max()) + 2 if rows.size else 2

    track_of, tracks = _tracks(table, rows)
    nested = nest(track_of, start, end)  # pre-order per track: start asc, end desc
    order, depth, clamped = nested.order, nested.depth, nested.clamped
    rows, start, end, track_of = rows[order], start[order], nested.end[order], track_of[order]
    track_offsets = np.searchsorted(track_of, np.arange(len(tracks) + 1))

    # Row-major layout: rows are (track, depth), depths of a track are 0..max without holes.
    track_depth = np.zeros(len(tracks), dtype=np.int64)
    if rows.size:
        np.maximum.at(track_depth, track_of, depth + 1)
    track_rows = np.concatenate(([0], np.cumsum(track_depth)))
    row = track_rows[track_of] + depth
    layout = np.argsort(row * span + start, kind="stable")
    rows, start, end, row = rows[layout], start[layout], end[layout], row[layout]
    n_rows = int(track_rows[-1])
    row_offsets = np.searchsorted(row, np.arange(n_rows + 1))
    for t, desc in enumerate(tracks):
        desc["id"], desc["depth"] = t, int(track_depth[t])
        desc["event_count"] = int(track_offsets[t + 1] - track_offsets[t])

    position = np.full(len(events), -1, dtype=np.int64)
    position[rows] = np.arange(rows.size)
    gap = merge_threshold(start, end, row)
    index = TimelineIndex(
        t0_us=t0, tick_ns=tick_ns, span=span, tracks=tracks,
        row_track=np.repeat(np.arange(len(tracks)), track_depth).astype(np.int64),
        row_depth=(np.arange(n_rows) - np.repeat(track_rows[:-1], track_depth)).astype(np.int64),
        row_offsets=row_offsets.astype(np.int64), track_rows=track_rows.astype(np.int64),
        start_key=row * span + start, end_key=row * span + end, gap=gap,
        event=rows.astype(np.int64),
        name=events["name"].cat.codes.to_numpy()[rows].astype(np.int32),
        position=position, levels=merge_levels(gap, span), clamped=clamped,
        end_tick=int(end.max()) if rows.size else 0,
    )
    _attach_flows(index, table)
    return index


def _drawable(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of the events drawn as slices, with start and end in us (instants: end = start)."""
    ph = events["ph"]
    phases = pd.Index(ph.cat.categories.astype(str))
    slice_code = np.append(phases.isin(SLICE_PHASES), False)[ph.cat.codes.to_numpy()]
    instant_code = np.append(phases.isin(INSTANT_PHASES), False)[ph.cat.codes.to_numpy()]
    ts = events["ts"].to_numpy(dtype=np.float64)
    dur = np.nan_to_num(events["dur"].to_numpy(dtype=np.float64), nan=0.0)
    keep = (slice_code | instant_code) & np.isfinite(ts)
    rows = np.flatnonzero(keep)
    start = ts[rows]
    return rows, start, start + np.where(slice_code[rows], dur[rows], 0.0)


def _tick_ns(extent_us: float, n: int) -> int:
    """1 ns, or coarser (powers of 10) when rows * span could overflow the int64 keys."""
    tick = 1
    while n > 0 and (extent_us * 1000.0 / tick + 2) * (n + 1) >= _INT64_ROOM:
        tick *= 10
    return tick


# ----------------------------------------------------------------------------------------------
# Tracks


def _tracks(table: TraceTable, rows: np.ndarray) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Track id (display order) of each drawn row, and the track descriptors."""
    events = table.events
    pid = events["pid"].cat.codes.to_numpy()[rows].astype(np.int64)
    tid = events["tid"].cat.codes.to_numpy()[rows].astype(np.int64)
    n_tid = len(events["tid"].cat.categories) + 1
    keys, track_of = _group(pid * n_tid + tid + n_tid + 1)  # codes start at -1 (missing)
    gpu_rows = np.isin(events["kind"].to_numpy()[rows], np.asarray(GPU_KINDS, dtype=np.int8))
    has_gpu = np.zeros(keys.size, dtype=bool)
    has_gpu[track_of[gpu_rows]] = True
    pid_names = events["pid"].cat.categories.astype(str)
    tid_names = events["tid"].cat.categories.astype(str)
    meta = _metadata(table)
    tracks = [_describe(_code_str(pid_names, k // n_tid - 1), _code_str(tid_names, k % n_tid - 1),
                        bool(g), meta) for k, g in zip(keys.tolist(), has_gpu)]
    display = sorted(range(len(tracks)), key=lambda t: tracks[t].pop("_sort"))
    rank = np.empty(len(tracks), dtype=np.int64)
    rank[display] = np.arange(len(tracks))
    return rank[track_of], [tracks[t] for t in display]


def _group(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, group of each key); O(n) when the key range is small."""
    if keys.size == 0:
        return keys, keys
    if int(keys.max()) < 1 << 24:
        present = np.bincount(keys) > 0
        rank = np.cumsum(present) - 1
        return np.flatnonzero(present), rank[keys]
    distinct, inverse = np.unique(keys, return_inverse=True)  # keys are 1-D: so is inverse
    return distinct, inverse


def _code_str(names: pd.Index, code: int) -> str:
    return str(names[code]) if code >= 0 else ""


def _metadata(table: TraceTable) -> dict[tuple[str, str, str], Any]:
    """(M event name, pid, tid) -> value; process entries use tid "". The last one wins."""
    meta: dict[tuple[str, str, str], Any] = {}
    for m in table.metadata.process_metadata:
        name = str(m.get("name"))
        tid = "" if name.startswith("process_") else str(m.get("tid"))
        meta[(name, str(m.get("pid")), tid)] = m.get("value")
    return meta


def _describe(pid: str, tid: str, has_gpu: bool, meta: dict) -> dict[str, Any]:
    process = meta.get(("process_name", pid, ""))
    labels = meta.get(("process_labels", pid, ""))
    thread = meta.get(("thread_name", pid, tid))
    numeric_pid = _number(pid)
    gpu = has_gpu or (isinstance(labels, str) and labels.startswith("GPU"))
    group = GPU if gpu else CPU if numeric_pid is not None else OTHER
    if thread is None:
        thread = (tid if tid.startswith("stream") else f"stream {tid}") if gpu else (
            f"thread {tid}" if _number(tid) is not None else tid)
    process_label = str(process) if process is not None else (
        f"GPU {pid}" if gpu and numeric_pid is not None else
        f"process {pid}" if numeric_pid is not None else pid or "(no pid)")
    if labels:
        process_label = f"{process_label} ({labels})"
    elif process is not None and numeric_pid is not None:
        process_label = f"{process_label} ({pid})"
    return {
        "pid": pid, "tid": tid, "kind": GROUP_NAMES[group],
        "process": process_label, "thread": str(thread).strip(),
        "_sort": (group, _sort_index(meta.get(("process_sort_index", pid, "")), numeric_pid), pid,
                  _sort_index(meta.get(("thread_sort_index", pid, tid)), _number(tid)), tid),
    }


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _sort_index(value: Any, fallback: Optional[float]) -> float:
    """M sort index, else the numeric id, else last."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return fallback if fallback is not None else math.inf


# ----------------------------------------------------------------------------------------------
# Helpers


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """[starts[0], starts[0]+counts[0]) ++ [starts[1], ...) ... as one index array."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + (np.arange(total) - offsets)


# ----------------------------------------------------------------------------------------------
# Merge levels


def merge_threshold(start: np.ndarray, end: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Pixel size (ticks) above which each event merges with the previous one of its row."""
    gap = np.full(start.size, np.inf)
    if start.size > 1:
        dur = (end - start).astype(np.float64)
        between = (start[1:] - end[:-1]).astype(np.float64)
        pair = np.maximum(np.maximum(dur[:-1], dur[1:]), between)
        gap[1:] = np.where(row[1:] == row[:-1], pair, np.inf)
    return gap


def merge_levels(gap: np.ndarray, span: int) -> list[tuple[float, np.ndarray]]:
    """Blocks at power-of-two bin sizes, kept when they shrink the previous kept level enough.

    A level for bin `b` starts a block at every position whose threshold is >= b, then ends
    with the number of positions (block i is [bounds[i], bounds[i+1])). Level 0 is the events
    themselves.
    """
    n = gap.size
    levels: list[tuple[float, np.ndarray]] = [(0.0, np.arange(n + 1, dtype=np.int64))]
    if n == 0:
        return levels
    finite = np.sort(gap[np.isfinite(gap)])
    bins = 2.0 ** np.arange(0, math.ceil(math.log2(span + 1)) + 1)  # the last exceeds any gap
    kept = n
    for b in bins:
        items = n - int(np.searchsorted(finite, b, side="left"))  # pairs with gap < b merge
        if items <= kept * LEVEL_SHRINK:
            levels.append((float(b), np.append(np.flatnonzero(gap >= b), n)))
            kept = items
    return levels


def level_for(index: TimelineIndex, merge_ticks: float) -> np.ndarray:
    """Block bounds of the coarsest level whose bin is at most `merge_ticks`."""
    chosen = index.levels[0][1]
    for bin_ticks, bounds in index.levels:
        if bin_ticks <= merge_ticks:
            chosen = bounds
    return chosen


# ----------------------------------------------------------------------------------------------
# Flows: s -> f pairs with the track, depth and event at both ends


FLOW_FIELDS = ("cat", "track_s", "tick_s", "pos_s", "track_f", "tick_f", "pos_f", "lo", "hi",
               "by_hi", "hi_sorted")


def _attach_flows(index: TimelineIndex, table: TraceTable) -> None:
    """`index.flows`: columns of s -> f pairs (by cat and id) sorted by their earlier end `lo`
    (`by_hi`: the order by the later end); `pos_*` is the event each end binds to (deepest
    enclosing one on its track, else -1)."""
    flows = table.flows
    index.flow_cats = []
    index.flows = {k: np.empty(0, dtype=np.int64) for k in FLOW_FIELDS}
    index.flows["id"] = np.empty(0)
    if len(flows) == 0:
        return
    track_of = _flow_tracks(index, flows)
    ts = flows["ts"].to_numpy(dtype=np.float64)
    ids = flows["id"].to_numpy(dtype=np.float64)
    usable = (track_of >= 0) & np.isfinite(ts) & np.isfinite(ids)
    phases = list(flows["ph"].cat.categories.astype(str))
    ph = flows["ph"].cat.codes.to_numpy()
    cat = flows["cat"].cat.codes.to_numpy()
    order = np.argsort(ts, kind="stable")  # the earliest end wins when an id repeats
    pairs = []
    for code in np.unique(cat[usable]):  # one iteration per flow category (ac2g, fwdbwd...)
        ends = [_first_per_id(order, usable & (cat == code) & (ph == phases.index(p)), ids)
                if p in phases else (np.empty(0), np.empty(0, dtype=np.int64))
                for p in ("s", "f")]
        _, i_s, i_f = np.intersect1d(ends[0][0], ends[1][0], assume_unique=True,
                                     return_indices=True)
        if i_s.size:
            index.flow_cats.append(str(flows["cat"].cat.categories[code]))
            pairs.append((len(index.flow_cats) - 1, ends[0][1][i_s], ends[1][1][i_f]))
    if not pairs:
        return
    out: dict[str, np.ndarray] = {
        "cat": np.concatenate([np.full(s_rows.size, c, dtype=np.int64) for c, s_rows, _ in pairs]),
        "id": np.concatenate([ids[s_rows] for _, s_rows, _ in pairs]),
    }
    for side, k in (("s", 1), ("f", 2)):
        rows = np.concatenate([p[k] for p in pairs])
        track = track_of[rows]
        tick = np.rint(index.ticks(ts[rows])).astype(np.int64)
        out[f"track_{side}"], out[f"tick_{side}"] = track, tick
        out[f"pos_{side}"] = enclosing(index, track, tick)
    lo = np.minimum(out["tick_s"], out["tick_f"])
    order = np.argsort(lo, kind="stable")
    index.flows = {k: v[order] for k, v in out.items()}
    index.flows["lo"] = lo[order]
    index.flows["hi"] = np.maximum(out["tick_s"], out["tick_f"])[order]
    index.flows["by_hi"] = np.argsort(index.flows["hi"], kind="stable")
    index.flows["hi_sorted"] = index.flows["hi"][index.flows["by_hi"]]


def _flow_tracks(index: TimelineIndex, flows: pd.DataFrame) -> np.ndarray:
    """Track id of each flow event from its (pid, tid) category codes, -1 when not drawn."""
    pid_code = {str(v): i for i, v in enumerate(flows["pid"].cat.categories)}
    tid_code = {str(v): i for i, v in enumerate(flows["tid"].cat.categories)}
    lookup = np.full((len(pid_code) + 1, len(tid_code) + 1), -1, dtype=np.int64)
    for t, desc in enumerate(index.tracks):  # one iteration per track
        if desc["pid"] in pid_code and desc["tid"] in tid_code:
            lookup[pid_code[desc["pid"]], tid_code[desc["tid"]]] = t
    return lookup[flows["pid"].cat.codes.to_numpy(), flows["tid"].cat.codes.to_numpy()]


def _first_per_id(order: np.ndarray, mask: np.ndarray, ids: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique ids, row of the earliest event with that id) among `mask`ed rows."""
    rows = order[mask[order]]
    unique, first = np.unique(ids[rows], return_index=True)
    return unique, rows[first]


def enclosing(index: TimelineIndex, track: np.ndarray, tick: np.ndarray) -> np.ndarray:
    """Position of the deepest event of `track` with start <= tick <= end, else -1."""
    found = np.full(track.size, -1, dtype=np.int64)
    if track.size == 0 or index.start_key.size == 0:
        return found
    depths = index.track_rows[track + 1] - index.track_rows[track]
    for d in range(int(depths.max()) if depths.size else 0):  # one pass per nesting level
        has = np.flatnonzero(depths > d)
        row = index.track_rows[track[has]] + d
        key = row * index.span + np.clip(tick[has], 0, index.span - 1)
        pos = np.searchsorted(index.start_key, key, side="right") - 1
        ok = (pos >= index.row_offsets[row]) & (index.end_key[np.maximum(pos, 0)] >= key)
        found[has[ok]] = pos[ok]
    return found
