"""The `timeline` view: a level-of-detail (LOD) trace timeline served per viewport.

The old plugin shipped the whole raw trace to a Catapult viewer (spec 1.4), which hung on large
files. Here the browser asks for a window [start_us, end_us] at `width` pixels and gets only what
can be seen there: events at least a pixel wide, each run of narrower neighbours (closer than a
pixel to each other) as one block that counts the events it hides, step ranges, flow arrows and
counter tracks sampled per pixel. Every event overlapping the window is either listed or counted
in exactly one block, and every pixel column that holds an event is covered by one of them.

Cost per request: a few `searchsorted` calls on the index (timeline_index.py) plus work
proportional to the items returned (at most ~2 per pixel per row), whatever the zoom.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from ...views.trace.payload import TimelineEventPayload, TimelinePayload, TimelineSearchPayload
from ..memo import memoised
from . import counters as tc
from .critical import critical_overlay, mark_runs
from .index import TimelineIndex, build_timeline_index, concat_ranges, level_for

__all__ = ["build_timeline", "build_timeline_index", "event_details", "search_timeline"]

DEFAULT_WIDTH = 2000
MAX_WIDTH = 16384
#: Budgets that keep a payload under ~1 MB of JSON whatever the trace (measured: ~25-30 bytes
#: per event/block, ~12 per counter point). Past MAX_ITEMS, runs merge at 2, 4... pixels;
#: counter series share MAX_COUNTER_POINTS (8 GPUs: 1000 bins each); flows and steps beyond
#: theirs are evenly sampled and flagged.
MAX_ITEMS = 20000
MAX_COUNTER_POINTS = 16000
MAX_FLOWS = 2000
MAX_STEPS = 4000
SEARCH_LIMIT = 200
_NAN_FREE = (int, str, bool)


def build_timeline(table: TraceTable, start_us: Optional[float] = None,
                   end_us: Optional[float] = None, width: int = DEFAULT_WIDTH,
                   critical_step: Optional[str] = None) -> TimelinePayload:
    """The `timeline` payload for a window (trace us, default: the whole trace) at `width` px;
    with `critical_step`, that step's critical path marked (`timeline_critical.py`).

    Raises ValueError for an empty or inverted window or a width below 1, KeyError for an
    unknown step.
    """
    index = build_timeline_index(table)
    start_us, end_us = _window(index, start_us, end_us)
    width = _width(width)
    ws, we = index.ticks(start_us), index.ticks(end_us)
    px = (we - ws) / width
    # Absolute us (1.7e15 in some traces) carry float round-off up to 0.25 us: widen the event
    # window by that much so an event at the very edge never drops out.
    slack = 2.0 * float(np.spacing(max(abs(start_us), abs(end_us)))) * 1000.0 / index.tick_ns
    merge_px = 1.0
    runs = _runs(index, ws - slack, we + slack, px * merge_px)
    while runs["count"].size > MAX_ITEMS:  # a deep, dense trace: merge at coarser pixels
        merge_px *= 2.0
        runs = _runs(index, ws - slack, we + slack, px * merge_px)
    fmt = _TimeFormat(index, ws, px)
    critical, marks = None, None
    if critical_step is not None:
        path_rows, critical = critical_overlay(table, index, critical_step, start_us, end_us,
                                               lambda us: fmt(index.ticks(us)))
        marks = mark_runs(index, runs, path_rows)
    names, tracks = _tracks_payload(table, index, runs, fmt, marks)
    extras = tc.timeline_extras(table)
    payload: dict[str, Any] = {
        "view": "timeline",
        "start_us": start_us, "end_us": end_us, "width": width,
        "us_per_px": px * index.tick_ns / 1000.0,
        "origin_us": start_us,
        "trace_start_us": float(index.us(0)), "trace_end_us": float(index.us(index.end_tick)),
        "merge_px": merge_px,
        "names": names,
        "tracks": tracks,
        "steps": _steps_payload(extras, ws, we, fmt),
        "flows": _flows_payload(index, ws, we, fmt),
        "counters": _counters_payload(extras, ws, we, width, fmt),
        "stats": _stats(runs),
    }
    if critical is not None:
        payload["critical"] = critical
    return payload  # type: ignore[return-value]


def _window(index: TimelineIndex, start_us: Optional[float], end_us: Optional[float]
            ) -> tuple[float, float]:
    lo = float(index.us(0)) if start_us is None else float(start_us)
    hi = float(index.us(index.end_tick)) if end_us is None else float(end_us)
    if start_us is None and end_us is None and hi <= lo:
        hi = lo + 1.0  # an empty or instant-only trace still gets a 1 us window
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"bad timeline window [{lo}, {hi}]: need start_us < end_us")
    return lo, hi


def _width(width: Any) -> int:
    width = int(width)
    if width < 1:
        raise ValueError(f"bad timeline width {width}: need >= 1 pixel")
    return min(width, MAX_WIDTH)


class _TimeFormat:
    """Ticks -> us relative to the window start, rounded to ~1/20 px (never below 1 ns)."""

    def __init__(self, index: TimelineIndex, ws: float, px: float) -> None:
        self.ws, self.us_per_tick = ws, index.tick_ns / 1000.0
        px_us = max(px * self.us_per_tick, 1e-12)
        self.decimals = int(min(3, max(0, math.ceil(-math.log10(px_us / 20.0)))))

    def __call__(self, ticks: np.ndarray) -> list:
        rel = np.round((np.asarray(ticks, dtype=np.float64) - self.ws) * self.us_per_tick,
                       self.decimals)
        return rel.astype(np.int64).tolist() if self.decimals == 0 else rel.tolist()

    def span(self, ticks: np.ndarray) -> list:
        return self(np.asarray(ticks, dtype=np.float64) + self.ws)


# ----------------------------------------------------------------------------------------------
# Level of detail


def _runs(index: TimelineIndex, ws: float, we: float, merge: float) -> dict[str, np.ndarray]:
    """Visible runs of all rows: row, first position, count, start and end ticks.

    Per row, the positions overlapping [ws, we] are [lo, hi); the chosen level's blocks covering
    them are cut to that range, then neighbours whose pair threshold is below `merge` join.
    """
    empty = np.empty(0, dtype=np.int64)
    nothing = {"row": empty, "first": empty, "count": empty, "start": empty, "end": empty}
    rows = np.arange(index.n_rows, dtype=np.int64)
    base = rows * index.span
    w_lo = min(max(math.ceil(ws), 0), index.span - 1)
    w_hi = math.floor(we)
    if w_hi < 0 or rows.size == 0:
        return nothing
    lo = np.searchsorted(index.end_key, base + w_lo, side="left")  # first ending at/after ws
    hi = np.searchsorted(index.start_key, base + min(w_hi, index.span - 1), side="right")
    vis = hi > lo
    if not vis.any():
        return nothing
    rows, lo, hi = rows[vis], lo[vis], hi[vis]
    bounds = level_for(index, merge)
    first = bounds[:-1]
    ia = np.searchsorted(first, lo, side="right") - 1
    ib = np.searchsorted(first, hi - 1, side="right") - 1
    n_items = ib - ia + 1
    item = concat_ranges(ia, n_items)
    row = np.repeat(rows, n_items)
    f = np.maximum(bounds[item], np.repeat(lo, n_items))
    last = np.minimum(bounds[item + 1], np.repeat(hi, n_items))  # exclusive
    join = index.gap[f] < merge
    join[np.cumsum(n_items) - n_items] = False  # a row's first item starts a run
    run = np.flatnonzero(~join)
    run_last = np.append(run[1:], item.size) - 1
    count = np.add.reduceat(last - f, run)
    run_row = row[run]
    return {
        "row": run_row, "first": f[run], "count": count,
        "start": index.start_key[f[run]] - run_row * index.span,
        "end": index.end_key[last[run_last] - 1] - run_row * index.span,
    }


def _tracks_payload(table: TraceTable, index: TimelineIndex, runs: dict[str, np.ndarray],
                    fmt: _TimeFormat, marks: Optional[np.ndarray] = None
                    ) -> tuple[list[str], list[dict[str, Any]]]:
    """(name table, tracks with their visible rows); with `marks` (path events per run),
    each row's `path` lists the positions of its marked events and blocks."""
    single = runs["count"] == 1
    event_pos = runs["first"][single]
    codes, local = np.unique(index.name[event_pos], return_inverse=True)
    categories = np.append(table.events["name"].cat.categories.astype(str).to_numpy(), "")
    names = categories[codes].tolist()  # code -1 (no name) -> ""
    events = {
        "name": local.reshape(-1).tolist(),
        "start": fmt(runs["start"][single]),
        "dur": fmt.span(runs["end"][single] - runs["start"][single]),
        "id": index.event[event_pos].tolist(),
    }
    blocks = {"start": fmt(runs["start"][~single]), "end": fmt(runs["end"][~single]),
              "count": runs["count"][~single].tolist()}
    ev_cut = _row_cuts(runs["row"][single], index.n_rows)
    bl_cut = _row_cuts(runs["row"][~single], index.n_rows)
    if marks is not None:
        ev_mark, bl_mark = marks[single] > 0, marks[~single] > 0
    tracks = []
    for t, desc in enumerate(index.tracks):  # one iteration per track, then per visible row
        rows = []
        for r in range(int(index.track_rows[t]), int(index.track_rows[t + 1])):
            e0, e1, b0, b1 = ev_cut[r], ev_cut[r + 1], bl_cut[r], bl_cut[r + 1]
            if e1 > e0 or b1 > b0:
                row = {"depth": int(index.row_depth[r]),
                       "events": {k: v[e0:e1] for k, v in events.items()},
                       "blocks": {k: v[b0:b1] for k, v in blocks.items()}}
                if marks is not None:
                    row["events"]["path"] = np.flatnonzero(ev_mark[e0:e1]).tolist()
                    row["blocks"]["path"] = np.flatnonzero(bl_mark[b0:b1]).tolist()
                rows.append(row)
        tracks.append({**desc, "rows": rows})
    return names, tracks


def _row_cuts(rows: np.ndarray, n_rows: int) -> list[int]:
    return np.searchsorted(rows, np.arange(n_rows + 1)).tolist()


def _stats(runs: dict[str, np.ndarray]) -> dict[str, int]:
    single = runs["count"] == 1
    return {"events": int(runs["count"].sum()), "shown": int(single.sum()),
            "blocks": int((~single).sum()), "hidden": int(runs["count"][~single].sum())}


# ----------------------------------------------------------------------------------------------
# Steps, flows, counters


def _steps_payload(extras: tc.TimelineExtras, ws: float, we: float, fmt: _TimeFormat
                   ) -> dict[str, list]:
    hit = np.flatnonzero((extras.step_start <= we) & (extras.step_end >= ws))  # a few thousand
    total = int(hit.size)
    if total > MAX_STEPS:
        hit = hit[np.linspace(0, total - 1, MAX_STEPS).astype(np.int64)]
    return {"total": total, "capped": total > MAX_STEPS,
            "name": [extras.step_names[i] for i in hit.tolist()],
            "start": fmt(extras.step_start[hit]), "end": fmt(extras.step_end[hit])}


def _flows_payload(index: TimelineIndex, ws: float, we: float, fmt: _TimeFormat
                   ) -> dict[str, Any]:
    """s -> f pairs with an end in the window (an even sample of MAX_FLOWS when more); pairs
    that only pass over the window (fwdbwd arrows span whole steps) are counted, not sent."""
    flows = index.flows
    lo, hi_sorted, by_hi = flows["lo"], flows["hi_sorted"], flows["by_hi"]
    a, b = int(np.searchsorted(lo, ws, "left")), int(np.searchsorted(lo, we, "right"))
    c, d = int(np.searchsorted(hi_sorted, ws, "left")), int(np.searchsorted(hi_sorted, we, "right"))
    entering = by_hi[c:d]
    entering = np.sort(entering[lo[entering] < ws])  # ends inside, starts before: all < a
    total = entering.size + b - a
    out: dict[str, Any] = {"total": int(total), "capped": total > MAX_FLOWS,
                           "limit": MAX_FLOWS, "crossing": int(a - c - entering.size),
                           "cats": index.flow_cats}
    # in `lo` order: entering, then a..b; an even sample of that sequence when capped
    if out["capped"]:
        k = np.linspace(0, total - 1, MAX_FLOWS).astype(np.int64)
    else:
        k = np.arange(total, dtype=np.int64)
    sel = a + k - entering.size
    early = k < entering.size
    sel[early] = entering[k[early]]
    out["cat"] = flows["cat"][sel].tolist()
    for side, label in (("s", "from"), ("f", "to")):
        pos, track = flows[f"pos_{side}"][sel], flows[f"track_{side}"][sel]
        found = pos >= 0
        safe = np.where(found, pos, 0)
        out[f"{label}_track"] = track.tolist()
        out[f"{label}_depth"] = np.where(
            found, index.row_of(safe) - index.track_rows[track], 0).tolist()
        out[f"{label}_ts"] = fmt(flows[f"tick_{side}"][sel])
        out[f"{label}_id"] = np.where(found, index.event[safe], -1).tolist()
    return out


def _counters_payload(extras: tc.TimelineExtras, ws: float, we: float, width: int,
                      fmt: _TimeFormat) -> list[dict[str, Any]]:
    bins = max(1, min(width, MAX_COUNTER_POINTS // max(1, len(extras.series))))
    edges = np.linspace(ws, we, bins + 1)
    out = []
    for series in extras.series:
        t, v = tc.sample(series, edges)
        values = np.round(v, 4).tolist() if series.unit == "fraction" else np.rint(v).astype(
            np.int64).tolist()
        out.append({**tc.describe(series), "t": fmt(t), "v": values})
    return out


# ----------------------------------------------------------------------------------------------
# Details and search


def event_details(table: TraceTable, event_id: int) -> TimelineEventPayload:
    """Everything known about one event (row of `table.events`): its columns, its side-table
    args, where it is drawn, its parent, its correlation partners (launch <-> kernel/memcpy/
    memset) and the flows that end on it. Raises KeyError for an unknown id."""
    events = table.events
    event_id = int(event_id)
    if not 0 <= event_id < len(events):
        raise KeyError(f"no event {event_id}")
    index = build_timeline_index(table)
    out = {"id": event_id, **_columns(events, event_id)}
    out["kind"] = Kind(int(events["kind"].iat[event_id])).name.lower()
    out["args"] = {name: _side_args(getattr(table, name), event_id)
                   for name in ("device_args", "op_args", "python_args")}
    out.update(_placement(index, event_id))
    out["correlated"] = [_summary(table, index, r) for r in _same_correlation(table, event_id)]
    out["flows"] = _event_flows(index, event_id)
    return out


def _columns(events: pd.DataFrame, row: int) -> dict[str, Any]:
    return {c: _plain(events[c].iat[row]) for c in events.columns if c != "kind"}


def _plain(value: Any) -> Any:
    """numpy/pandas scalar -> JSON value (NaN -> None)."""
    if value is None or isinstance(value, _NAN_FREE):
        return value
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return None if pd.isna(value) else str(value)


def _side_args(frame: pd.DataFrame, event_id: int) -> dict[str, Any]:
    """The side-table row of an event, without absent values ({} when it has none)."""
    ids = frame["event"].to_numpy()
    lo, hi = (np.searchsorted(ids, event_id, "left"), np.searchsorted(ids, event_id, "right")) \
        if ids.size and np.all(ids[1:] >= ids[:-1]) else _mask_range(ids, event_id)
    if hi <= lo:
        return {}
    values = {c: _plain(frame[c].iat[int(lo)]) for c in frame.columns if c != "event"}
    return {k: v for k, v in values.items() if v is not None}


def _mask_range(ids: np.ndarray, event_id: int) -> tuple[int, int]:
    hits = np.flatnonzero(ids == event_id)
    return (int(hits[0]), int(hits[0]) + 1) if hits.size else (0, 0)


def _placement(index: TimelineIndex, event_id: int) -> dict[str, Any]:
    pos = int(index.position[event_id])
    if pos < 0:
        return {"track": None, "depth": None, "parent": None}
    row = int(index.row_of(np.array([pos]))[0])
    depth = int(index.row_depth[row])
    track = int(index.row_track[row])
    start = int(index.start_key[pos] - row * index.span)
    parent = None
    if depth > 0:
        found = enclosing_at(index, row - 1, start)
        parent = int(index.event[found]) if found >= 0 else None
    return {"track": track, "depth": depth, "parent": parent,
            "drawn_end_us": float(index.us(index.end_key[pos] - row * index.span))}


def enclosing_at(index: TimelineIndex, row: int, tick: int) -> int:
    """Position of the event of `row` with start <= tick <= end, else -1."""
    key = row * index.span + tick
    pos = int(np.searchsorted(index.start_key, key, side="right")) - 1
    ok = pos >= index.row_offsets[row] and index.end_key[pos] >= key
    return pos if ok else -1


def _same_correlation(table: TraceTable, event_id: int) -> np.ndarray:
    corr = table.events["correlation"].to_numpy()
    value = corr[event_id]
    if not np.isfinite(value):
        return np.empty(0, dtype=np.int64)
    order, sorted_corr = memoised(table, "timeline_correlation", lambda: _correlation_order(corr))
    lo, hi = np.searchsorted(sorted_corr, value, "left"), np.searchsorted(sorted_corr, value,
                                                                          "right")
    rows = order[lo:hi]
    return rows[rows != event_id]


def _correlation_order(corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(np.isfinite(corr))
    order = rows[np.argsort(corr[rows], kind="stable")]
    return order, corr[order]


def _summary(table: TraceTable, index: TimelineIndex, row: int) -> dict[str, Any]:
    events = table.events
    row = int(row)
    placed = _placement(index, row)
    return {"id": row, "name": _plain(events["name"].iat[row]),
            "kind": Kind(int(events["kind"].iat[row])).name.lower(),
            "ts": _plain(events["ts"].iat[row]), "dur": _plain(events["dur"].iat[row]),
            "track": placed["track"], "depth": placed["depth"]}


def _event_flows(index: TimelineIndex, event_id: int) -> list[dict[str, Any]]:
    pos = int(index.position[event_id])
    flows = index.flows
    if pos < 0 or not flows:
        return []
    out = []
    for side, other in (("s", "f"), ("f", "s")):
        for k in np.flatnonzero(flows[f"pos_{side}"] == pos).tolist():
            other_pos = int(flows[f"pos_{other}"][k])
            out.append({"cat": index.flow_cats[int(flows["cat"][k])],
                        "id": _plain(flows["id"][k]),
                        "direction": "out" if side == "s" else "in",
                        "other_track": int(flows[f"track_{other}"][k]),
                        "other_ts": float(index.us(flows[f"tick_{other}"][k])),
                        "other_id": int(index.event[other_pos]) if other_pos >= 0 else None})
    return out


def search_timeline(table: TraceTable, query: str, limit: int = SEARCH_LIMIT,
                    start_us: Optional[float] = None) -> TimelineSearchPayload:
    """Events whose name contains `query` (case-insensitive), in time order.

    Names are matched once per distinct name, then events by name code. `total` counts every
    match; `matches` holds the first `limit` (from `start_us` on, when given, to page through).
    """
    index = build_timeline_index(table)
    categories = pd.Index(table.events["name"].cat.categories.astype(str))
    query = str(query)
    hit_names = np.flatnonzero(categories.str.contains(query, case=False, regex=False)) \
        if query else np.empty(0, dtype=np.int64)
    lookup = np.zeros(len(categories) + 1, dtype=bool)
    lookup[hit_names] = True
    pos = np.flatnonzero(lookup[index.name])
    starts = index.starts(pos)
    if start_us is not None:
        keep = starts >= index.ticks(float(start_us))
        pos, starts = pos[keep], starts[keep]
    order = np.argsort(starts, kind="stable")[: max(int(limit), 0)]
    matches = []
    for p in pos[order].tolist():  # at most `limit`
        row = int(index.row_of(np.array([p]))[0])
        event = int(index.event[p])
        matches.append({
            "id": event, "name": str(categories[index.name[p]]),
            "track": int(index.row_track[row]), "depth": int(index.row_depth[row]),
            "ts": float(table.events["ts"].iat[event]),
            "dur": float(np.nan_to_num(table.events["dur"].iat[event])),
        })
    return {"query": query, "total": int(pos.size), "limit": int(limit),
            "truncated": int(pos.size) > len(matches),
            "names": [str(categories[c]) for c in hit_names[:50].tolist()],
            "name_count": int(hit_names.size), "matches": matches}
