"""The LOD timeline (tb_plugin/analysis/timeline/view*.py): index, viewport payloads, details,
search.

Crafted traces use integer-us times, so payload times (relative to the window start, rounded to
a fraction of a pixel) are exact and the brute-force checks can compare them directly.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.timeline import view as tl
from tb_plugin.analysis.timeline.view import (
    build_timeline,
    build_timeline_index,
    event_details,
    search_timeline,
)
from tb_plugin.load import load_trace
from tests.support import needs_shared

from .helpers import CPU_PID, CPU_TID, cpu_op, kernel, make_table, runtime, step, trace_files

# ----------------------------------------------------------------------------------------------
# Helpers


def _flow(ph: str, flow_id: int, ts: float, pid: Any, tid: Any, cat: str = "ac2g"
          ) -> dict[str, Any]:
    event = {"ph": ph, "id": flow_id, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": cat}
    if ph == "f":
        event["bp"] = "e"
    return event


def _meta(kind: str, pid: Any, tid: Any, **args: Any) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _track(payload: dict, pid: Any, tid: Any) -> dict:
    return next(t for t in payload["tracks"] if t["pid"] == str(pid) and t["tid"] == str(tid))


def _rows(track: dict) -> dict[int, dict]:
    return {row["depth"]: row for row in track["rows"]}


_ORACLES: dict[int, dict] = {}


def _oracle(table) -> dict[tuple[str, str], list[tuple[int, float, float, int]]]:
    """Per (pid, tid): (event row, start, clamped end, depth) by an independent stack sweep."""
    if id(table) in _ORACLES:
        return _ORACLES[id(table)]
    events = table.events
    ph, pid, tid = (events[c].astype(str).tolist() for c in ("ph", "pid", "tid"))
    ts, dur = events["ts"].tolist(), events["dur"].tolist()
    per_track = defaultdict(list)
    for row in range(len(events)):
        if ph[row] in ("X", "i"):
            end = ts[row] + (0.0 if math.isnan(dur[row]) else dur[row])
            per_track[(pid[row], tid[row])].append((ts[row], -end, row))
    out = {}
    for key, items in per_track.items():
        stack: list[float] = []
        placed = []
        for start, neg_end, row in sorted(items):
            end = -neg_end
            while stack and stack[-1] <= start:
                stack.pop()
            if stack and end > stack[-1]:
                end = stack[-1]
            placed.append((row, start, end, len(stack)))
            if end > start:
                stack.append(end)
        out[key] = placed
    _ORACLES[id(table)] = out
    return out


def _items(payload: dict, row: dict) -> list[tuple[float, float, int, Any]]:
    """(abs start, abs end, count, event id or None) of a payload row, in order."""
    origin = payload["origin_us"]
    ev, bl = row["events"], row["blocks"]
    items = [(origin + s, origin + s + d, 1, i)
             for s, d, i in zip(ev["start"], ev["dur"], ev["id"])]
    items += [(origin + s, origin + e, c, None)
              for s, e, c in zip(bl["start"], bl["end"], bl["count"])]
    return sorted(items, key=lambda x: (x[0], x[1]))


def _columns(start: float, end: float, ws: float, we: float, px: float, width: int
             ) -> tuple[int, int]:
    """First and last pixel column (inclusive) that [start, end] touches in the window."""
    first = min(int(math.floor((max(start, ws) - ws) / px)), width - 1)
    last = min(int(math.floor((min(end, we) - ws) / px)), width - 1)
    return first, last


def check_lod(table, payload: dict, ws: float, we: float, width: int) -> None:
    """Brute force: nothing visible is lost, counts add up, runs are maximal and disjoint."""
    px = (we - ws) / width
    merge = px * payload["merge_px"]
    oracle = _oracle(table)
    total = 0
    for track in payload["tracks"]:
        placed = oracle.get((track["pid"], track["tid"]), [])
        rows = _rows(track)
        for depth in range(track["depth"]):
            visible = [(r, s, e) for r, s, e, d in placed if d == depth and s <= we and e >= ws]
            items = _items(payload, rows[depth]) if depth in rows else []
            total += len(visible)
            _check_row(visible, items, (ws, we, px, width), merge)
    assert payload["stats"]["events"] == total


def _check_row(visible, items, window, merge) -> None:
    shown = {i: (s, e) for s, e, c, i in items if i is not None}
    by_id = {r: (s, e) for r, s, e in visible}
    assert set(shown) <= set(by_id)
    for event_id, span in shown.items():
        assert span == pytest.approx(by_id[event_id])
    for r, s, e in visible:  # wide events are never hidden
        if e - s >= merge:
            assert r in shown
    hidden = sorted((s, e) for r, s, e in visible if r not in shown)  # disjoint in a row
    hidden_starts = [s for s, _ in hidden]
    assert sum(c for *_, c, i in items if i is None) == len(hidden)
    for s, e, c, i in items:
        if i is None:  # a block counts exactly the hidden events inside it
            lo, hi = bisect.bisect_left(hidden_starts, s), bisect.bisect_right(hidden_starts, e)
            assert c >= 2 and c == hi - lo and all(he <= e for _, he in hidden[lo:hi])
    for a, b in zip(items, items[1:]):
        assert a[1] <= b[0]  # disjoint, sorted
        tiny_a = a[3] is None or a[1] - a[0] < merge
        tiny_b = b[3] is None or b[1] - b[0] < merge
        assert not (tiny_a and tiny_b and b[0] - a[1] < merge)  # runs are maximal
    covered = np.zeros(window[3] + 1, dtype=np.int64)  # +1 at each item's first column...
    for s, e, _, _ in items:
        first, last = _columns(s, e, *window)
        covered[first] += 1
        covered[last + 1] -= 1
    covered = np.cumsum(covered)[:-1] > 0
    for _, s, e in visible:  # ...so every column holding an event shows an item
        first, last = _columns(s, e, *window)
        assert covered[first:last + 1].all()


def _random_trace(rng: np.random.Generator, n_top: int = 60) -> list[dict[str, Any]]:
    """Nested CPU ops on two threads (with 1 us overruns and zero-length events) and a GPU
    stream with back-to-back kernels; integer us."""
    events: list[dict[str, Any]] = []

    def fill(lo: int, hi: int, depth: int, tid: int) -> None:
        t = lo
        while t < hi and depth < 6:
            dur = int(rng.choice([0, 1, 2, 3, 10, 50, 200]))
            if t + dur > hi:
                break
            overrun = int(depth > 0 and rng.random() < 0.05)
            events.append(cpu_op(f"op{rng.integers(20)}", t, dur + overrun, tid=tid))
            if dur > 2:
                fill(t + 1, t + dur - 1, depth + 1, tid)
            t += dur + int(rng.choice([0, 0, 1, 2, 30]))

    for tid in (CPU_TID, CPU_TID + 1):
        t = 0
        for _ in range(n_top):
            dur = int(rng.choice([1, 5, 100, 400, 2000]))
            events.append(cpu_op(f"top{rng.integers(5)}", t, dur, tid=tid))
            fill(t, t + dur, 1, tid)
            t += dur + int(rng.choice([0, 1, 3, 500]))
    t = 0
    for _ in range(n_top * 5):
        dur = int(rng.choice([0, 1, 2, 7, 60]))
        events.append(kernel(t, dur, name=f"k{rng.integers(4)}"))
        t += dur + int(rng.choice([0, 1, 4, 100]))
    return events


# ----------------------------------------------------------------------------------------------
# Index: tracks and nesting


def test_tracks_named_and_ordered_cpu_before_gpu(tmp_path):
    events = [
        _meta("process_name", CPU_PID, 0, name="python"),
        _meta("process_labels", CPU_PID, 0, labels="CPU"),
        _meta("thread_name", CPU_PID, 300, name="worker"),
        _meta("thread_sort_index", CPU_PID, 300, sort_index=1),
        _meta("thread_sort_index", CPU_PID, CPU_TID, sort_index=2),
        _meta("process_name", 0, 0, name="python"),
        _meta("process_labels", 0, 0, labels="GPU 0"),
        kernel(5, 1),
        cpu_op("a", 0, 10),
        cpu_op("b", 0, 10, tid=300),
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "PyTorch Profiler", "ts": 0, "dur": 10},
    ]
    index = build_timeline_index(make_table(events, tmp_path))
    tracks = [(t["kind"], t["process"], t["thread"]) for t in index.tracks]
    assert tracks == [("cpu", "python (CPU)", "worker"), ("cpu", "python (CPU)", "thread 200"),
                      ("gpu", "python (GPU 0)", "stream 7"),
                      ("other", "Spans", "PyTorch Profiler")]


def test_nesting_depths_and_rows(tmp_path):
    events = [cpu_op("root", 0, 100), cpu_op("a", 0, 40), cpu_op("a1", 10, 10),
              cpu_op("b", 50, 50), cpu_op("b1", 50, 10), cpu_op("b11", 50, 5),
              cpu_op("same", 50, 5), cpu_op("next", 100, 10)]
    table = make_table(events, tmp_path)
    depth = {event_details(table, i)["name"]: event_details(table, i)["depth"]
             for i in range(len(events))}
    # identical intervals nest (the first is the parent); a start at a parent's end is a sibling
    assert depth == {"root": 0, "a": 1, "a1": 2, "b": 1, "b1": 2, "b11": 3, "same": 4,
                     "next": 0}
    assert event_details(table, 5)["parent"] == 4  # b11 inside b1
    assert build_timeline_index(table).tracks[0]["depth"] == 5


def test_overrun_from_rounding_is_clamped_into_parent(tmp_path):
    # the child ends 1 ns after its parent (rounding); the next op starts inside that ns
    events = [cpu_op("parent", 0, 10), cpu_op("child", 5, 5.001), cpu_op("next", 10.0005, 5)]
    table = make_table(events, tmp_path)
    index = build_timeline_index(table)
    assert index.clamped == 1
    child = event_details(table, 1)
    assert (child["depth"], child["dur"], child["drawn_end_us"]) == (1, 5.001, 10.0)
    assert event_details(table, 2)["depth"] == 0  # not pushed under the overrunning child
    payload = build_timeline(table, start_us=0, end_us=20, width=20000)
    depth1 = _rows(payload["tracks"][0])[1]["events"]
    assert depth1["dur"] == [5.0]


def test_index_is_memoised(tmp_path):
    table = make_table([cpu_op("a", 0, 1)], tmp_path)
    assert build_timeline_index(table) is build_timeline_index(table)


# ----------------------------------------------------------------------------------------------
# LOD payloads


@pytest.mark.parametrize("seed", range(4))
def test_lod_brute_force_random_traces_and_windows(tmp_path, seed):
    rng = np.random.default_rng(seed)
    table = make_table(_random_trace(rng), tmp_path)
    index = build_timeline_index(table)
    end = int(math.ceil(index.us(index.end_tick)))
    windows = [(0, end, 997), (0, end, 50)]
    for _ in range(12):
        a = int(rng.integers(-50, end))
        b = a + int(rng.choice([3, 40, 700, 5000, end]))
        windows.append((a, b, int(rng.choice([7, 64, 333, 4000]))))
    for ws, we, width in windows:
        payload = build_timeline(table, start_us=ws, end_us=we, width=width)
        check_lod(table, payload, ws, we, width)


def test_item_budget_merges_at_coarser_pixels_without_losing_anything(tmp_path, monkeypatch):
    table = make_table(_random_trace(np.random.default_rng(7)), tmp_path)
    monkeypatch.setattr(tl, "MAX_ITEMS", 40)
    payload = build_timeline(table, start_us=0, end_us=3000, width=2000)
    assert payload["merge_px"] > 1
    items = payload["stats"]["shown"] + payload["stats"]["blocks"]
    assert items <= 40
    check_lod(table, payload, 0, 3000, 2000)


def test_window_edges(tmp_path):
    events = [cpu_op("before", 0, 4), cpu_op("into", 5, 20), cpu_op("touch_start", 12, 8),
              cpu_op("inside", 30, 5), cpu_op("touch_end", 40, 5), cpu_op("after", 41, 5),
              cpu_op("spans", 0, 100, tid=300)]
    table = make_table(events, tmp_path)
    payload = build_timeline(table, start_us=20, end_us=40, width=1000)
    rows = _rows(_track(payload, CPU_PID, CPU_TID))
    names = [payload["names"][c] for c in rows[0]["events"]["name"]]
    assert names == ["into", "inside", "touch_end"]
    assert rows[0]["events"]["start"][0] == -15  # relative to origin_us = 20
    # "touch_start" ends exactly at the window start: it still meets the window
    assert [payload["names"][c] for c in rows[1]["events"]["name"]] == ["touch_start"]
    spans = _rows(_track(payload, CPU_PID, 300))[0]["events"]
    assert (spans["start"], spans["dur"]) == ([-20], [100])  # started long before the window
    assert build_timeline(table, start_us=200, end_us=300)["stats"]["events"] == 0
    assert build_timeline(table, start_us=-300, end_us=-200)["stats"]["events"] == 0


def test_partial_overlap_is_drawn_inside_the_earlier_event(tmp_path):
    # not rounding but a real overlap on one thread: drawn clamped (as a child), never lost
    table = make_table([cpu_op("first", 0, 10), cpu_op("second", 5, 20)], tmp_path)
    second = event_details(table, 1)
    assert (second["depth"], second["dur"], second["drawn_end_us"]) == (1, 20.0, 10.0)
    check_lod(table, build_timeline(table, width=7), 0, 10, 7)


def test_edge_blocks_count_only_events_in_the_window(tmp_path):
    events = [cpu_op(f"tiny{i}", i, 0.5) for i in range(100)]  # 100 half-us ops, 0.5 us apart
    table = make_table(events, tmp_path)
    payload = build_timeline(table, start_us=10, end_us=20, width=2)  # 5 us pixels
    blocks = _rows(payload["tracks"][0])[0]["blocks"]
    assert blocks["count"] == [11]  # ops starting at 10..20 (the one at 9 ends at 9.5)
    assert (blocks["start"], blocks["end"]) == ([0], [10.5])
    whole = build_timeline(table, width=2)
    assert sum(_rows(whole["tracks"][0])[0]["blocks"]["count"]) == 100


def test_zero_duration_events(tmp_path):
    events = [cpu_op("parent", 0, 10), cpu_op("zero_at_start", 0, 0), cpu_op("zero_in", 5, 0),
              cpu_op("zero_at_end", 10, 0), cpu_op("lonely", 50, 0),
              {"ph": "i", "s": "t", "name": "instant", "pid": CPU_PID, "tid": CPU_TID, "ts": 7,
               "cat": "cpu_instant_event"}]
    table = make_table(events, tmp_path)
    depth = {event_details(table, i)["name"]: event_details(table, i)["depth"] for i in range(6)}
    assert depth == {"parent": 0, "zero_at_start": 1, "zero_in": 1, "zero_at_end": 0,
                     "lonely": 0, "instant": 1}
    payload = build_timeline(table, start_us=0, end_us=100, width=10)  # 10 us pixels
    rows = _rows(payload["tracks"][0])
    names0 = [payload["names"][c] for c in rows[0]["events"]["name"]]
    assert names0 == ["parent", "zero_at_end", "lonely"]
    assert rows[0]["events"]["dur"] == [10, 0, 0]
    assert rows[1]["blocks"] == {"start": [0], "end": [7], "count": [3]}  # 0, 5, 7 us
    check_lod(table, payload, 0, 100, 10)
    check_lod(table, build_timeline(table, start_us=0, end_us=100, width=100), 0, 100, 100)


def test_payload_json_shape_and_validation(tmp_path):
    events = [step(1, 0, 100), cpu_op("a", 10, 20), runtime(12, 3, corr=1), kernel(20, 5, 1)]
    table = make_table(events, tmp_path)
    payload = build_timeline(table, width=300)
    text = json.dumps(payload, allow_nan=False)
    assert json.loads(text) == payload
    assert set(payload) == {"view", "start_us", "end_us", "width", "us_per_px", "origin_us",
                            "trace_start_us", "trace_end_us", "merge_px", "names", "tracks",
                            "steps", "flows", "counters", "stats"}
    assert (payload["start_us"], payload["end_us"]) == (0, 100)
    row = _rows(payload["tracks"][0])[0]
    assert set(row) == {"depth", "events", "blocks"}
    assert set(row["events"]) == {"name", "start", "dur", "id"}
    assert set(row["blocks"]) == {"start", "end", "count"}
    for bad in ({"start_us": 5, "end_us": 5}, {"start_us": 9, "end_us": 1}, {"width": 0},
                {"start_us": float("nan"), "end_us": 1}):
        with pytest.raises(ValueError):
            build_timeline(table, **bad)
    assert build_timeline(table, width=10**6)["width"] == tl.MAX_WIDTH


def test_steps_in_window(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 100), step(3, 200, 100), cpu_op("a", 5, 10)]
    table = make_table(events, tmp_path)
    steps = build_timeline(table, start_us=150, end_us=250, width=100)["steps"]
    assert steps == {"total": 2, "capped": False, "name": ["2", "3"], "start": [-50, 50],
                     "end": [50, 150]}


def test_steps_and_counter_points_are_capped(tmp_path, monkeypatch):
    events = [step(i, i * 10, 10) for i in range(1, 51)] + [kernel(i * 10, 5) for i in range(50)]
    table = make_table(events, tmp_path)
    monkeypatch.setattr(tl, "MAX_STEPS", 5)
    monkeypatch.setattr(tl, "MAX_COUNTER_POINTS", 20)  # utilization only: 20 bins of 25 us
    payload = build_timeline(table, start_us=0, end_us=500, width=500)
    steps = payload["steps"]
    assert (steps["total"], steps["capped"], steps["name"]) == (50, True,
                                                                ["1", "13", "25", "37", "50"])
    (util,) = payload["counters"]
    assert len(util["t"]) == 20 and set(util["v"]) == {0.6, 0.4}  # 3 or 2 kernels per bin


# ----------------------------------------------------------------------------------------------
# Flows, counters


def _launch_trace() -> list[dict[str, Any]]:
    return [
        cpu_op("aten::mm", 0, 20, ext=1),
        runtime(2, 5, corr=7, ext=1),
        kernel(10, 30, 7, ext=1, grid=[4, 1, 1], block=[128, 1, 1]),
        cpu_op("aten::mm_backward", 100, 20, tid=300),
        _flow("s", 7, 2, CPU_PID, CPU_TID),
        _flow("f", 7, 10, 0, 7),
        _flow("f", 8, 10, CPU_PID, CPU_TID),  # an end without a start: dropped
        _flow("s", 1, 0, CPU_PID, CPU_TID, cat="fwdbwd"),
        _flow("f", 1, 100, CPU_PID, 300, cat="fwdbwd"),
    ]


def test_flows_connect_launch_to_kernel_and_forward_to_backward(tmp_path):
    table = make_table(_launch_trace(), tmp_path)
    payload = build_timeline(table, start_us=0, end_us=200, width=200)
    flows = payload["flows"]
    cpu = _track(payload, CPU_PID, CPU_TID)["id"]
    gpu = _track(payload, 0, 7)["id"]
    bwd = _track(payload, CPU_PID, 300)["id"]
    got = sorted(zip([flows["cats"][c] for c in flows["cat"]], flows["from_track"],
                     flows["from_depth"], flows["from_id"], flows["from_ts"], flows["to_track"],
                     flows["to_depth"], flows["to_id"], flows["to_ts"]))
    assert got == [("ac2g", cpu, 1, 1, 2, gpu, 0, 2, 10), ("fwdbwd", cpu, 0, 0, 0, bwd, 0, 3, 100)]
    assert (flows["total"], flows["capped"], flows["crossing"]) == (2, False, 0)
    # a window holding one end sends the arrow; one between the ends only counts it
    launch_end = build_timeline(table, start_us=8, end_us=50, width=10)["flows"]
    assert (launch_end["total"], launch_end["crossing"], launch_end["to_id"]) == (1, 1, [2])
    between = build_timeline(table, start_us=50, end_us=60, width=10)["flows"]
    assert (between["total"], between["crossing"], between["from_ts"]) == (0, 1, [])
    after = build_timeline(table, start_us=150, end_us=200, width=10)["flows"]
    assert (after["total"], after["crossing"]) == (0, 0)


def test_flows_are_capped_with_an_even_sample(tmp_path, monkeypatch):
    events = []
    for i in range(50):
        events += [runtime(i * 10, 2, corr=i), kernel(i * 10 + 5, 2, i),
                   _flow("s", i, i * 10, CPU_PID, CPU_TID), _flow("f", i, i * 10 + 5, 0, 7)]
    table = make_table(events, tmp_path)
    monkeypatch.setattr(tl, "MAX_FLOWS", 10)
    flows = build_timeline(table, width=100)["flows"]
    assert (flows["total"], flows["capped"], len(flows["from_ts"])) == (50, True, 10)
    assert flows["from_ts"][0] == 0 and flows["from_ts"][-1] == 490
    late = build_timeline(table, start_us=3, end_us=490, width=100)["flows"]  # flow 0 enters
    assert (late["total"], late["capped"], late["from_ts"][0], late["from_ts"][-1]) == (
        50, True, -3, 487)
    assert late["from_ts"] == sorted(late["from_ts"])


def test_gpu_counters_per_pixel(tmp_path):
    events = [step(1, 0, 400), cpu_op("a", 0, 400),
              kernel(100, 100, **{"blocks per SM": 0.5}), kernel(300, 50)]
    table = make_table(events, tmp_path)
    counters = {c["kind"]: c for c in build_timeline(table, start_us=0, end_us=400,
                                                     width=8)["counters"]}
    util = counters["gpu_utilization"]
    assert (util["name"], util["device"], util["unit"]) == ("GPU 0 Utilization", "GPU 0",
                                                            "fraction")
    assert (util["t"], util["v"]) == ([0, 100, 200, 300, 350], [0, 1, 0, 1, 0])
    sm = counters["sm_efficiency"]
    assert (sm["t"], sm["v"]) == ([0, 100, 200], [0, 0.5, 0])
    zoomed = build_timeline(table, start_us=150, end_us=350, width=2)["counters"][0]
    assert (zoomed["t"], zoomed["v"]) == ([0], [0.5])  # means (not maxima); repeats dropped


def test_memory_counters_keep_peaks(tmp_path):
    def mem(ts, nbytes, total, reserved):
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": CPU_TID,
                "ts": ts, "cat": "cpu_instant_event",
                "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": nbytes,
                         "Total Allocated": total, "Total Reserved": reserved}}

    events = [cpu_op("a", 0, 10000), mem(100, 10, 10, 100), mem(5000, 1000, 1010, 2000),
              mem(5001, -1000, 10, 2000)]
    table = make_table(events, tmp_path)
    counters = {c["name"]: c for c in build_timeline(table, width=10)["counters"]}
    allocated = counters["GPU 0 Memory Allocated"]
    assert (allocated["unit"], allocated["t"], allocated["v"]) == (
        "bytes", [0, 5000, 6000], [10, 1010, 10])  # the 1 us spike survives 1000 us pixels
    reserved = counters["GPU 0 Memory Reserved"]
    assert (reserved["t"], reserved["v"]) == ([0, 5000], [100, 2000])


# ----------------------------------------------------------------------------------------------
# Details and search


def test_event_details_include_args_partners_and_flows(tmp_path):
    events = _launch_trace()
    events[0]["args"]["Input Dims"] = [[2, 3], [3, 4]]
    table = make_table(events, tmp_path)
    k = event_details(table, 2)
    assert (k["name"], k["kind"], k["ts"], k["dur"], k["correlation"]) == (
        "void gemm_kernel<float>()", "kernel", 10.0, 30.0, 7.0)
    assert k["args"]["device_args"]["grid"] == "[4, 1, 1]"
    assert k["args"]["device_args"]["device"] == 0
    assert [(c["id"], c["kind"], c["depth"]) for c in k["correlated"]] == [(1, "runtime", 1)]
    assert k["flows"][0]["direction"] == "in" and k["flows"][0]["other_id"] == 1
    launch = event_details(table, 1)
    assert [c["id"] for c in launch["correlated"]] == [2] and launch["parent"] == 0
    op = event_details(table, 0)
    assert op["args"]["op_args"]["input_dims"] == "[[2, 3], [3, 4]]"
    assert op["args"]["device_args"] == {} and op["correlated"] == []
    assert {f["cat"] for f in op["flows"]} == {"fwdbwd"}
    json.dumps(k, allow_nan=False)
    with pytest.raises(KeyError):
        event_details(table, 99)


def test_search_is_case_insensitive_sorted_and_not_limited_to_a_window(tmp_path):
    events = [cpu_op("aten::MatMul", 500, 5), cpu_op("aten::add", 0, 5),
              cpu_op("aten::matmul", 100, 5), cpu_op("matmul_kernel", 900, 5, tid=300),
              cpu_op("other", 1000, 5)]
    table = make_table(events, tmp_path)
    build_timeline(table, start_us=0, end_us=10)  # the current window holds none of them
    result = search_timeline(table, "MATMUL")
    assert result["total"] == 3 and not result["truncated"]
    assert [(m["name"], m["ts"]) for m in result["matches"]] == [
        ("aten::matmul", 100.0), ("aten::MatMul", 500.0), ("matmul_kernel", 900.0)]
    assert set(result["names"]) == {"aten::MatMul", "aten::matmul", "matmul_kernel"}
    limited = search_timeline(table, "matmul", limit=1)
    assert (limited["total"], limited["truncated"], len(limited["matches"])) == (3, True, 1)
    later = search_timeline(table, "matmul", start_us=200)
    assert [m["ts"] for m in later["matches"]] == [500.0, 900.0]
    assert search_timeline(table, "nothing like it")["total"] == 0
    assert search_timeline(table, "")["total"] == 0


# ----------------------------------------------------------------------------------------------
# Real traces


@needs_shared
@pytest.mark.parametrize("path", trace_files(), ids=lambda p: p.parent.name + "/" + p.name[:12])
def test_shared_traces_whole_and_zoomed_payloads(path):
    table = load_trace(str(path), use_cache=False)
    index = build_timeline_index(table)
    payload = build_timeline(table, width=4000)
    size = len(json.dumps(payload, allow_nan=False))
    assert size <= 1_000_000
    assert payload["stats"]["events"] == index.event.size  # whole trace: every event counted
    kinds = {t["kind"] for t in payload["tracks"]}
    has_kernels = bool((table.events["kind"].to_numpy() == 6).any())
    assert ("gpu" in kinds) == has_kernels
    assert (len(payload["counters"]) > 0) == has_kernels or len(table.memory) > 0
    assert payload["flows"]["total"] <= len(table.flows)
    # a zoom into the busiest millisecond
    starts = index.us(index.starts(np.arange(index.event.size)))
    mid = float(np.median(starts))
    zoomed = build_timeline(table, start_us=mid, end_us=mid + 1000, width=4000)
    assert len(json.dumps(zoomed, allow_nan=False)) <= 1_000_000
    assert zoomed["stats"]["events"] > 0
