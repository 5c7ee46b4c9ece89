"""Property tests of the interval kernels against brute-force references written here.

Every event set is drawn by `hypothesis` on an integer time grid, so that exact ties (equal
starts, equal ends, an end equal to the next start, zero-length events, a gap equal to a
threshold) are frequent, and every reference works point by point: a unit cell [x, x + 1) of
the grid is covered or not, a queue length is counted at each cell, a stack is pushed and
popped one interval at a time. No reference calls the kernel it checks.

Kernels: the range algebra (analysis/ranges.py), nesting (analysis/nesting.py), the GPU idle
breakdown per device and the idle gap causes per stream, the queue length, and the critical
path's split of a step into shares (analysis/gpu_idle/).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tb_plugin.analysis import ranges as rg
from tb_plugin.analysis.gpu_idle.critical_path import (
    _EDGE_GAP,
    LAUNCH,
    SHARES,
    Graph,
    walk,
)
from tb_plugin.analysis.gpu_idle.idle import (
    CAUSES,
    MAX_POINTS,
    _device_breakdown,
    _reduce_max,
    queue_series,
    queue_summary,
    stream_gaps,
)
from tb_plugin.analysis.graph_launches import BACKLOG_MIN_US
from tb_plugin.analysis.nesting import dense_ranks, levels, nest, subtree_ends

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    report_multiple_bugs=False)
T_MAX = 40  # the time grid: integers in [0, T_MAX]


def _interval():
    return st.tuples(st.integers(0, T_MAX), st.integers(0, 12)).map(lambda p: (p[0], p[0] + p[1]))


intervals = st.lists(_interval(), max_size=25)


def _arrays(pairs):
    s = np.array([p[0] for p in pairs], dtype=np.float64)
    e = np.array([p[1] for p in pairs], dtype=np.float64)
    return s, e


def _cells(pairs, hi=T_MAX + 13):
    """Covered unit cells [x, x + 1) of a union of integer intervals, as a boolean grid."""
    covered = np.zeros(hi, dtype=bool)
    for s, e in pairs:
        covered[s:e] = True
    return covered


def _runs(covered):
    """The merged interval list of a boolean cell grid: maximal runs of covered cells."""
    out, x = [], 0
    while x < len(covered):
        if covered[x]:
            y = x
            while y < len(covered) and covered[y]:
                y += 1
            out.append((float(x), float(y)))
            x = y
        else:
            x += 1
    return out


def _as_list(ranges):
    return [(float(s), float(e)) for s, e in zip(*ranges)]


# -- range algebra --------------------------------------------------------------------------

@SETTINGS
@given(intervals, intervals)
def test_range_algebra_equals_the_cell_grid(a, b):
    ca, cb = _cells(a), _cells(b)
    a_r, b_r = _arrays(a), _arrays(b)
    merged = rg.merge(*a_r)
    assert _as_list(merged) == _runs(ca)  # touching intervals join, empty ones vanish
    assert rg.is_merged(merged)
    assert rg.total_length(merged) == ca.sum()
    # intersect/subtract return merged form (sorted, disjoint, non-empty: an input already in
    # that form may touch, and is used as it is) covering exactly the cells
    for got, want in ((rg.intersect(a_r, b_r), ca & cb), (rg.subtract(a_r, b_r), ca & ~cb)):
        assert rg.is_merged(got)
        assert _cells([(int(x), int(y)) for x, y in _as_list(got)]).tolist() == want.tolist()
    if not any(e > s for s, e in b):  # nothing to take away: a comes back merged, unsplit
        assert _as_list(rg.subtract(a_r, b_r)) == _runs(ca)


def test_instants_take_nothing_away_and_split_nothing():
    """An empty interval is no interval: subtracting [1, 1) from [0, 2) leaves [0, 2) whole,
    and a list with one is not already merged (it is merged away)."""
    whole = (np.array([0.0]), np.array([2.0]))
    instant = (np.array([1.0]), np.array([1.0]))
    assert _as_list(rg.subtract(whole, instant)) == [(0.0, 2.0)]
    assert not rg.is_merged(instant) and rg.is_merged(whole)
    touching = (np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    assert rg.is_merged(touching)  # disjoint half-open intervals may touch
    assert not rg.is_merged((np.array([0.0, 0.5]), np.array([1.0, 2.0])))  # overlapping


@SETTINGS
@given(intervals, _interval())
def test_clip_keeps_the_cells_inside_the_window(a, window):
    lo, hi = window
    covered = _cells(a)
    inside = np.zeros_like(covered)
    inside[lo:hi] = True
    got = rg.clip(_arrays(a), float(lo), float(hi))
    assert rg.is_merged(got)
    assert _cells([(int(x), int(y)) for x, y in _as_list(got)]).tolist() == \
        (covered & inside).tolist()


@SETTINGS
@given(intervals, st.lists(st.integers(-2, T_MAX + 14), max_size=30))
def test_contains_is_half_open(a, points):
    """A point is inside [s, e) when s <= p < e: its start yes, its end no."""
    want = [any(s <= p < e for s, e in a) for p in points]
    got = rg.contains(_arrays(a), np.array(points, dtype=np.float64))
    assert got.tolist() == want
    assert got.dtype == np.bool_  # a mask the callers index with, even for no ranges at all


@SETTINGS
@given(intervals, st.lists(_interval(), min_size=1, max_size=10))
def test_length_in_windows_counts_covered_cells(a, windows):
    covered = _cells(a)
    want = [float(covered[s:e].sum()) for s, e in windows]
    got = rg.length_in_windows(_arrays(a), *_arrays(windows))
    assert got.tolist() == want


# -- nesting --------------------------------------------------------------------------------

def _stack_reference(group, start, end):
    """The nesting contract as a stack, one interval at a time: visit by (group, start asc,
    end desc, input index); pop what has ended by the start (half-open) or is another group;
    the top left is the parent; clamp an end that outlasts the parent's; depth = stack size."""
    order = sorted(range(len(start)), key=lambda i: (group[i], start[i], -end[i], i))
    clamped_end = list(end)
    parent_pos, depth, stack, clamped = [], [], [], 0
    for pos, i in enumerate(order):
        while stack and (group[order[stack[-1]]] != group[i]
                         or start[i] >= clamped_end[order[stack[-1]]]):
            stack.pop()
        depth.append(len(stack))
        parent_pos.append(stack[-1] if stack else -1)
        if stack and clamped_end[i] > clamped_end[order[stack[-1]]]:
            clamped_end[i] = clamped_end[order[stack[-1]]]
            clamped += 1
        stack.append(pos)
    return order, parent_pos, depth, clamped_end, clamped


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 2), _interval()), max_size=40))
def test_nest_equals_the_stack(items):
    end = np.array([p[1] for _, p in items], dtype=np.float64)
    _check_nest(items)
    assert end.tolist() == [p[1] for _, p in items]  # the caller's array is left alone


def _check_nest(items):
    group = np.array([g for g, _ in items], dtype=np.int64)
    start = np.array([p[0] for _, p in items], dtype=np.float64)
    end = np.array([p[1] for _, p in items], dtype=np.float64)
    order, parent, depth, clamped_end, clamped = _stack_reference(
        group.tolist(), start.tolist(), end.tolist())
    got = nest(group, start, end)
    assert got.order.tolist() == order
    assert got.parent.tolist() == parent
    assert got.depth.tolist() == depth
    assert got.end.tolist() == clamped_end
    assert got.clamped == clamped
    return got


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          report_multiple_bugs=False)
@given(st.lists(st.tuples(st.integers(0, 1), _interval()), max_size=15))
def test_nest_past_the_clamping_rounds_equals_the_stack(extra):
    """A chain of 80 intervals each overlapping the next two needs more clamping rounds than
    the vectorised path runs, so the plain loop (`_nest_sequential`) nests it; touching siblings
    and instants drawn beside it check the loop's half-open and instant rules."""
    chain = [(0, (k, k + 3)) for k in range(0, 80)]
    got = _check_nest(chain + [(g, (a + 90, b + 90)) for g, (a, b) in extra])
    # in the chain, [3j, 3j + 3) is a root and the next two are clamped to its end: 80 - 27
    assert got.clamped >= 53


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 6).map(float), st.just(float("nan"))), max_size=30))
def test_dense_ranks_equal_numpy_unique(values):
    """Equal values one rank, NaNs one value ranked last, like np.unique's inverse."""
    values = np.array(values, dtype=np.float64)
    ranks, distinct = dense_ranks(values)
    unique, inverse = np.unique(values, return_inverse=True, equal_nan=True)
    assert distinct == len(unique)
    assert ranks.tolist() == inverse.tolist()


@SETTINGS
@given(st.lists(st.integers(0, 3), max_size=30))
def test_levels_and_subtree_ends_equal_the_scan(steps):
    """For a pre-order depth sequence: level k holds the nodes of depth k in order; a node's
    subtree ends at the next node not deeper than it."""
    depth = []
    for step in steps:  # a valid pre-order: each node at most one level below the previous
        depth.append(0 if not depth else min(step, depth[-1] + 1))
    depth = np.array(depth, dtype=np.int64)
    n = len(depth)
    got = levels(depth)
    want = [[i for i in range(n) if depth[i] == k] for k in range(int(depth.max(initial=0)) + 1)]
    assert [g.tolist() for g in got] == want
    parent = np.array([max((j for j in range(i) if depth[j] == depth[i] - 1), default=-1)
                       for i in range(n)], dtype=np.int64)
    ends = [next((j for j in range(i + 1, n) if depth[j] <= depth[i]), n) for i in range(n)]
    assert subtree_ends(parent, depth).tolist() == ends


# -- GPU idle: temporal breakdown per device -------------------------------------------------

@SETTINGS
@given(st.lists(st.tuples(_interval(), st.integers(0, 2)), min_size=1, max_size=25))
def test_temporal_breakdown_equals_the_cell_grid(items):
    """Compute = cells with a compute event; communication = cells with a communication event
    and no compute; memory = cells with only copies; idle = the window's other cells."""
    frame = pd.DataFrame({"start": [float(p[0]) for p, _ in items],
                          "end": [float(p[1]) for p, _ in items],
                          "cls": [c for _, c in items]})
    by_class = [_cells([p for p, c in items if c == k]) for k in range(3)]
    lo = min(p[0] for p, _ in items)
    hi = max(p[1] for p, _ in items)
    window = np.zeros_like(by_class[0])
    window[lo:hi] = True
    c, m, y = by_class
    got = _device_breakdown(3, frame)
    assert got["window_us"] == hi - lo
    assert got["compute_us"] == c.sum()
    assert got["communication_us"] == (m & ~c).sum()
    assert got["memory_us"] == (y & ~c & ~m).sum()
    assert got["idle_us"] == (window & ~c & ~m & ~y).sum()
    assert got["compute_communication_overlap_us"] == (c & m).sum()
    assert got["idle_pct"] == (100.0 * got["idle_us"] / (hi - lo) if hi > lo else 0.0)


# -- GPU idle: gap causes per stream ---------------------------------------------------------

def _gaps_reference(rows, kernel_wait_us):
    """Per (device, stream), events by start: a gap is start − (max earlier end) when > 0;
    host wait when the launch started strictly after the stream went idle; kernel wait when
    launched by then and the gap is strictly below kernel_wait_us; else other."""
    out = []
    for key in sorted({(d, s) for d, s, *_ in rows}):
        mine = sorted((r for r in rows if (r[0], r[1]) == key), key=lambda r: (r[2], r[3]))
        reach = None
        for d, s, start, end, launch, event in mine:
            if reach is not None and start - reach > 0:
                gap = start - reach
                if launch is not None and launch > reach:
                    cause = 0
                elif launch is not None and gap < kernel_wait_us:
                    cause = 1
                else:
                    cause = 2
                out.append((d, s, reach, start, gap, cause, event))
            reach = end if reach is None else max(reach, end)
    return out


gap_rows = st.lists(st.tuples(st.integers(0, 1), st.integers(7, 8), _interval(),
                              st.one_of(st.none(), st.integers(0, T_MAX + 12))),
                    min_size=1, max_size=25)


@SETTINGS
@given(gap_rows, st.integers(1, 6))
def test_stream_gaps_equal_the_loop(items, kernel_wait_us):
    rows = [(d, s, float(p[0]), float(p[1]), None if launch is None else float(launch), i)
            for i, (d, s, p, launch) in enumerate(items)]
    frame = pd.DataFrame(rows, columns=["device", "stream", "start", "end", "launch_start",
                                        "event"])
    frame["launch_start"] = frame["launch_start"].astype(float)  # None → NaN: no launch link
    frame["stream"] = frame["stream"].astype(float)
    frame = frame.sort_values(["device", "stream", "start", "end"], kind="stable")
    got = stream_gaps(frame, float(kernel_wait_us))
    got_rows = list(zip(got["device"].tolist(), got["stream"].tolist(), got["start"].tolist(),
                        got["end"].tolist(), got["gap"].tolist(), got["cause"].tolist(),
                        got["next_event"].tolist()))
    want = _gaps_reference(rows, kernel_wait_us)
    assert sorted(got_rows, key=lambda r: (r[0], r[1], r[3], r[6])) == \
        sorted(want, key=lambda r: (r[0], r[1], r[3], r[6]))
    assert {CAUSES[c] for *_, c, _ in want} <= set(CAUSES)


# -- GPU idle: queue length ------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.tuples(st.integers(0, T_MAX), st.integers(0, 6)), min_size=1, max_size=20),
       st.integers(1, 4))
def test_queue_length_equals_counting(ops, queue_full):
    """Length at time t = launches at or before t − starts at or before t (every change at t
    applied); the summary integrates it cell by cell over [first launch, last start]."""
    launch = np.array([float(a) for a, _ in ops])
    start = np.array([float(a + w) for a, w in ops])
    times, length = queue_series(launch, start)
    got = queue_summary(times, length, queue_full)
    lo, hi = int(launch.min()), int(start.max())
    settled = [int((launch <= t).sum() - (start <= t).sum()) for t in range(lo, hi + 1)]
    if len(ops) == 1 and lo == hi:
        # one op whose kernel starts at its launch: two changes, both at one time
        assert got["max"] == 0 and got["mean"] == 0.0 and got["full_us"] == 0.0
        return
    assert got["max"] == max(settled)  # −1s before +1s at equal times: no transient peak
    cells = settled[:-1]  # the length held over [t, t + 1)
    assert got["mean"] == (sum(cells) / (hi - lo) if hi > lo else 0.0)
    assert got["full_us"] == sum(1 for v in cells if v >= queue_full)


# -- critical path: the walk's split of a step ------------------------------------------------

LABELS = ("launch", "runtime", "kernel", "sync")


@st.composite
def chains(draw):
    """A path of nodes with binding predecessors: node i's predecessor is an earlier node (or
    none); the sink starts inside the step, as `_step_walk` picks it; times are coarse so
    that launch-to-kernel waits cross BACKLOG_MIN_US both ways."""
    n = draw(st.integers(1, 8))
    unit = BACKLOG_MIN_US / 4
    ts = [draw(st.integers(0, 40)) * unit for _ in range(n)]
    ends = [t + draw(st.integers(0, 6)) * unit for t in ts]
    order = sorted(range(n), key=lambda i: (ends[i], ts[i], i))
    rank = {v: k for k, v in enumerate(order)}
    pred, edge = [], []
    for i in range(n):
        earlier = [j for j in range(n) if rank[j] < rank[i]]
        pred.append(draw(st.sampled_from([-1, *earlier])))
        edge.append(draw(st.integers(0, 4)))
    nodes = [draw(st.sampled_from(LABELS)) for _ in range(n)]
    sink = order[-1]  # the node that ends last among those starting in the step [lo, hi)
    lo = draw(st.integers(0, int(ts[sink] / unit))) * unit
    hi = ts[sink] + draw(st.integers(1, 30)) * unit
    return ts, ends, pred, edge, nodes, sink, lo, hi


def _walk_reference(ts, ends, pred, edge, nodes, sink, lo, hi):
    """Point by point over [lo, hi): after the sink's end is host compute; otherwise the point
    belongs to the first node v back along the path with point >= max(end of its binding
    predecessor, lo): the node's own label from its start on, its edge's gap label before
    that (a launch edge's gap of >= BACKLOG_MIN_US is backlog); the path's first node's gap is
    its edge's label, or host compute (idle before a kernel) without a predecessor."""
    unit = BACKLOG_MIN_US / 4
    shares = dict.fromkeys(SHARES, 0.0)
    path = [sink]
    while pred[path[-1]] >= 0 and ends[pred[path[-1]]] > lo:
        path.append(pred[path[-1]])
    gap_cells: dict[int, int] = {}
    owner = []
    for k in range(int(round((hi - lo) / unit))):
        x = lo + (k + 0.5) * unit
        if x >= min(ends[sink], hi):
            owner.append(("host", None))
            continue
        for v in path:
            u = pred[v]
            floor = max(ends[u], lo) if u >= 0 and ends[u] > lo else lo
            if x >= floor:
                if x >= ts[v]:
                    owner.append(("node", v))
                else:
                    owner.append(("gap", v))
                    gap_cells[v] = gap_cells.get(v, 0) + 1
                break
    for kind, v in owner:
        if kind == "host":
            shares["host_compute"] += unit
        elif kind == "node":
            shares[nodes[v]] += unit
        else:
            u = pred[v]
            if u < 0:
                label = "idle" if nodes[v] == "kernel" else "host_compute"
            else:
                label = _EDGE_GAP[edge[v]]
                if label == "launch" and edge[v] == LAUNCH and gap_cells[v] * unit >= \
                        BACKLOG_MIN_US:
                    label = "backlog"
            shares[label] += unit
    return shares, path


@SETTINGS
@given(chains())
def test_critical_path_walk_equals_the_pointwise_split(chain):
    ts, ends, pred, edge, nodes, sink, lo, hi = chain
    graph = Graph(len(ts))
    graph.pred[:] = pred
    graph.edge[:] = edge
    graph.node[:] = nodes
    shares, path = walk(graph, np.array(ts), np.array(ends), sink, lo, hi)
    want, want_path = _walk_reference(ts, ends, pred, edge, nodes, sink, lo, hi)
    assert shares == want
    assert path == want_path
    assert sum(shares.values()) == hi - lo  # the parts sum to the step length


# -- the edges the grid does not reach ---------------------------------------------------------

def _frame(rows):
    return pd.DataFrame(rows, columns=["device", "stream", "start", "end", "launch_start", "event"])


def test_empty_inputs_give_the_empty_shapes():
    """No queue changes: zeros and empty series; no event on a known stream: no gap rows, with
    every column present."""
    empty = np.empty(0)
    assert queue_summary(empty, empty, 1) == {
        "max": 0, "mean": 0.0, "full_us": 0.0, "series": {"t_us": [], "length": []}}
    gaps = stream_gaps(_frame([(0, np.nan, 0.0, 1.0, np.nan, 0)]), 5.0)
    assert list(gaps.columns) == ["device", "stream", "start", "end", "gap", "cause",
                                  "next_event"]
    assert len(gaps) == 0


def test_sub_microsecond_windows_and_streams_stay_apart():
    """Times below 1 us: a window of 0.75 us with 0.25 us idle is 33.3% idle (not 0), and two
    streams whose events all fall inside 0.5 us are still kept apart (a gap of one stream is
    never measured from the other's end)."""
    frame = pd.DataFrame({"start": [0.0, 0.5], "end": [0.25, 0.75], "cls": [0, 0]})
    got = _device_breakdown(4, frame)
    assert got["device"] == 4
    assert (got["window_us"], got["idle_us"]) == (0.75, 0.25)
    assert got["idle_pct"] == 100.0 * 0.25 / 0.75
    rows = [(0, 7.0, 0.0, 0.75, np.nan, 0),  # stream 7 busy until 0.75
            (0, 8.0, 0.0, 0.125, np.nan, 1), (0, 8.0, 0.25, 0.375, np.nan, 2)]
    gaps = stream_gaps(_frame(rows), 5.0)
    assert list(zip(gaps["stream"], gaps["start"], gaps["end"])) == [(8.0, 0.125, 0.25)]


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          report_multiple_bugs=False)
@given(st.integers(MAX_POINTS - 1, MAX_POINTS + 300), st.integers(0, 10**6))
@example(MAX_POINTS, 1)  # exactly MAX_POINTS points: still sent as they are
@example(MAX_POINTS + 1, 1)
def test_series_reduction_keeps_each_buckets_maximum(n, seed):
    """Up to MAX_POINTS points a series is sent as it is; beyond, [first, last] is cut into
    MAX_POINTS equal buckets (the last one closed) and each non-empty bucket sends its left
    edge and the maximum of its values."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.integers(0, 5000, n)).astype(float)
    values = rng.integers(-3, 30, n).astype(float)
    t, v = _reduce_max(times, values)
    if n <= MAX_POINTS:
        assert (t, v) == (times.tolist(), values.tolist())
        return
    lo, hi = times[0], times[-1]
    width = (hi - lo) / MAX_POINTS
    want_t, want_v = [], []
    for b in range(MAX_POINTS):
        left = np.linspace(lo, hi, MAX_POINTS + 1)[b]
        right = np.linspace(lo, hi, MAX_POINTS + 1)[b + 1]
        inside = [y for x, y in zip(times, values)
                  if left <= x < right or (b == MAX_POINTS - 1 and x == hi)]
        if inside:
            want_t.append(float(left))
            want_v.append(max(inside))
    assert width > 0 and len(t) <= MAX_POINTS
    assert (t, v) == (want_t, want_v)


def _graph(pred, edge, nodes):
    graph = Graph(len(pred))
    graph.pred[:], graph.edge[:], graph.node[:] = pred, edge, nodes
    return graph


def test_a_launch_wait_of_exactly_the_backlog_threshold_is_backlog():
    """A launch call [0, 10) whose kernel starts BACKLOG_MIN_US after the call ended: the wait
    is backlog at the threshold itself (>=), launch time 1 us below it."""
    for wait, label in ((BACKLOG_MIN_US, "backlog"), (BACKLOG_MIN_US - 1, "launch")):
        ts, ends = np.array([0.0, 10 + wait]), np.array([10.0, 110 + wait])
        shares, path = walk(_graph([-1, 0], [-1, LAUNCH], ["launch", "kernel"]), ts, ends, 1,
                            0.0, 110 + wait)
        assert path == [1, 0]
        assert shares["kernel"] == 100 and shares[label] == wait + (10 if label == "launch"
                                                                    else 0)
        assert sum(shares.values()) == 110 + wait


def test_the_path_stops_at_a_predecessor_that_ends_where_the_step_starts():
    """Step [100, 200): the kernel's launch call ends at 100 exactly, so it is not on the step's
    path; the wait from 100 to the kernel's start is charged to the kernel's launch edge."""
    ts, ends = np.array([0.0, 150.0]), np.array([100.0, 200.0])
    shares, path = walk(_graph([-1, 0], [-1, LAUNCH], ["runtime", "kernel"]), ts, ends, 1,
                        100.0, 200.0)
    assert path == [1]
    assert (shares["kernel"], shares["launch"], sum(shares.values())) == (50.0, 50.0, 100.0)
