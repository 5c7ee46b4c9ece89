"""Rules of the timeline index (tb_plugin/analysis/timeline/index.py) at their boundaries: track
labels and display order without metadata, the key grouping on both sides of its fast-path
limit, merge levels derived by hand from the docstring's rule, and the flow columns' shape."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.timeline.index import (
    _group,
    _tick_ns,
    build_timeline_index,
    concat_ranges,
    level_for,
    merge_levels,
    merge_threshold,
)
from tb_plugin.analysis.timeline.view import (
    MAX_WIDTH,
    _TimeFormat,
    _width,
    build_timeline,
    search_timeline,
)

from .helpers import CPU_PID, cpu_op, kernel, make_table, step


def _meta(kind: str, pid: Any, tid: Any, **args: Any) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _lane(pid: Any, tid: Any, ts: float = 0) -> dict[str, Any]:
    return {"ph": "X", "cat": "Trace", "name": "lane", "pid": pid, "tid": tid, "ts": ts,
            "dur": 1}


def _tracks(events, tmp_path) -> list[tuple[str, str, str]]:
    index = build_timeline_index(make_table(events, tmp_path))
    return [(t["kind"], t["process"], t["thread"]) for t in index.tracks]


def test_labels_without_metadata(tmp_path):
    # no process_name: a GPU pid is "GPU <pid>", a numeric CPU pid "process <pid>", a named lane
    # keeps its pid; GPU tids are streams, numeric CPU tids threads, other tids verbatim
    events = [kernel(0, 1), cpu_op("a", 0, 1), _lane("Spans", "Profiler")]
    assert _tracks(events, tmp_path) == [
        ("cpu", f"process {CPU_PID}", "thread 200"),
        ("gpu", "GPU 0", "stream 7"),
        ("other", "Spans", "Profiler"),
    ]


def test_named_process_gets_its_pid_or_labels(tmp_path):
    events = [_meta("process_name", CPU_PID, 0, name="python"), cpu_op("a", 0, 1),
              _meta("process_name", 0, 0, name="python"),
              _meta("process_labels", 0, 0, labels="GPU 0"), kernel(0, 1),
              _meta("process_name", "Spans", 0, name="Traces"), _lane("Spans", "Profiler")]
    assert _tracks(events, tmp_path) == [
        ("cpu", f"python ({CPU_PID})", "thread 200"),
        ("gpu", "python (GPU 0)", "stream 7"),
        ("other", "Traces", "Profiler"),  # a non-numeric pid is not appended
    ]


def test_threads_sort_by_number_not_text(tmp_path):
    # as text "10" < "100" < "9"; the numeric id is the fallback sort key
    events = [cpu_op("a", 0, 1, tid=100), cpu_op("a", 0, 1, tid=9), cpu_op("a", 0, 1, tid=10)]
    assert [t[2] for t in _tracks(events, tmp_path)] == ["thread 9", "thread 10", "thread 100"]


def test_thread_sort_index_beats_the_numeric_id(tmp_path):
    events = [cpu_op("a", 0, 1, tid=9), cpu_op("a", 0, 1, tid=10),
              _meta("thread_sort_index", CPU_PID, 10, sort_index=9)]
    # 10 has index 9, 9 falls back to 9: a tie, broken by the tid text ("10" < "9")
    assert [t[2] for t in _tracks(events, tmp_path)] == ["thread 10", "thread 9"]
    events[2] = _meta("thread_sort_index", CPU_PID, 10, sort_index=9.5)
    assert [t[2] for t in _tracks(events, tmp_path)] == ["thread 9", "thread 10"]


def test_processes_without_a_sort_index_or_numeric_pid_sort_last(tmp_path):
    # "M sort index, else the numeric id, else last": even a huge sort index is before "last"
    for index in (1, 1e20, 1e300):
        events = [_lane("Alpha", "x"), _lane("Zed", "x"),
                  _meta("process_sort_index", "Zed", 0, sort_index=index)]
        assert [t[1] for t in _tracks(events, tmp_path)] == ["Zed", "Alpha"], index
    # neither has one: by pid text
    events = [_lane("Zed", "x"), _lane("Alpha", "x")]
    assert [t[1] for t in _tracks(events, tmp_path)] == ["Alpha", "Zed"]


def test_process_sort_index_orders_numeric_pids(tmp_path):
    events = [cpu_op("a", 0, 1), {**cpu_op("b", 0, 1), "pid": 5},
              _meta("process_sort_index", CPU_PID, 0, sort_index=1)]
    assert [t[1] for t in _tracks(events, tmp_path)] == [f"process {CPU_PID}", "process 5"]


def test_group_both_sides_of_the_dense_limit():
    # below 2**24 keys are counted in a dense array; from 2**24 on they are sorted
    for top in (2**24 - 1, 2**24, 2**40):
        keys = np.array([top, 5, top, 7, 5, 0], dtype=np.int64)
        distinct, group = _group(keys)
        assert distinct.tolist() == [0, 5, 7, top]
        assert group.tolist() == [3, 1, 3, 2, 1, 0]
        assert group.shape == keys.shape
    distinct, group = _group(np.array([2**30], dtype=np.int64))
    assert (distinct.tolist(), group.tolist()) == ([2**30], [0])
    distinct, group = _group(np.zeros(0, dtype=np.int64))
    assert distinct.size == group.size == 0


def test_merge_levels_by_hand():
    inf = np.inf
    # span 10: bins 1, 2, 4, 8, 16 (2**ceil(log2(11)) = 16). n = 5, kept starts at 5.
    # b=1,2: nothing merges (5 items); b=4: gaps 2, 3 merge -> 3 items > 2.5, not kept;
    # b=8: 5 merges too -> 2 items <= 2.5, kept; b=16: 2 > 1, not kept
    levels = merge_levels(np.array([inf, 3, 5, inf, 2.0]), 10)
    assert [b for b, _ in levels] == [0.0, 8.0]
    assert levels[0][1].tolist() == [0, 1, 2, 3, 4, 5]
    assert levels[1][1].tolist() == [0, 3, 5]


def test_merge_levels_keep_exactly_half_and_a_gap_equal_to_the_bin():
    inf = np.inf
    # a gap equal to the bin does not merge (gap < b merges): at b=4 nothing merges; at b=8
    # 4 -> 2 items, exactly half: kept
    levels = merge_levels(np.array([inf, 4, 4, inf]), 100)
    assert [(b, bounds.tolist()) for b, bounds in levels] == [(0.0, [0, 1, 2, 3, 4]),
                                                              (8.0, [0, 3, 4])]
    # 3 -> 2 items is more than half: never kept
    assert [b for b, _ in merge_levels(np.array([inf, 3, inf]), 100)] == [0.0]
    # the coarsest bin exceeds the span, so a row of any gaps ends as one block
    levels = merge_levels(np.array([inf, 1000, 1000, 1000]), 1000)
    assert [(b, bounds.tolist()) for b, bounds in levels] == [(0.0, [0, 1, 2, 3, 4]),
                                                              (1024.0, [0, 4])]
    assert [(b, bounds.tolist()) for b, bounds in merge_levels(np.zeros(0), 2)] == [(0.0, [0])]
    assert [b for b, _ in merge_levels(np.array([inf]), 2)] == [0.0]


def test_flow_columns_are_the_same_with_and_without_flows(tmp_path):
    plain = build_timeline_index(make_table([cpu_op("a", 0, 10)], tmp_path))
    linked = build_timeline_index(make_table([
        cpu_op("a", 0, 10), cpu_op("b", 20, 10),
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": CPU_PID, "tid": 200,
         "ts": 5},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": CPU_PID, "tid": 200,
         "ts": 25, "bp": "e"},
    ], tmp_path))
    assert linked.flows["id"].tolist() == [1.0] and linked.flow_cats == ["fwdbwd"]
    assert sorted(plain.flows) == sorted(linked.flows)
    assert all(v.size == 0 for v in plain.flows.values()) and plain.flow_cats == []


def test_time_format_rounds_to_a_twentieth_of_a_pixel(tmp_path):
    index = build_timeline_index(make_table([cpu_op("a", 0, 10)], tmp_path))
    assert index.tick_ns == 1
    # decimals = ceil(-log10(px_us / 20)) within [0, 3]; px in ticks (ns)
    for px, decimals in ((10**6, 0), (20000, 0), (19999, 1), (2000, 1), (1999, 2), (200, 2),
                         (199, 3), (1, 3), (0, 3)):
        assert _TimeFormat(index, 0.0, px).decimals == decimals, px
    coarse = _TimeFormat(index, 1000.0, 20000)  # whole us, as ints
    assert coarse([1000, 2499, 2500, 3600]) == [0, 1, 2, 3]  # 1.499, 1.5 (to even), 2.6 us
    assert all(type(v) is int for v in coarse([1000, 2499]))
    fine = _TimeFormat(index, 1000.0, 1)
    assert fine([1000, 1001, 2234]) == [0.0, 0.001, 1.234]
    assert fine.span([5]) == [0.005]  # a length: not shifted by the window start


def test_width_is_at_least_one_pixel_and_capped():
    assert _width(1) == 1 and _width("7") == 7
    assert _width(MAX_WIDTH) == MAX_WIDTH and _width(MAX_WIDTH + 1) == MAX_WIDTH
    with pytest.raises(ValueError, match="bad timeline width 0: need >= 1 pixel"):
        _width(0)


def test_default_window_of_an_instant_only_trace_is_one_us(tmp_path):
    table = make_table([{"ph": "i", "s": "t", "name": "mark", "pid": CPU_PID, "tid": 200,
                         "ts": 50, "cat": "user"}], tmp_path)
    payload = build_timeline(table, width=10)
    assert (payload["start_us"], payload["end_us"]) == (50.0, 51.0)
    with pytest.raises(ValueError, match=r"bad timeline window \[50.0, 50.0\]"):
        build_timeline(table, start_us=50, end_us=50)


def test_search_fields_page_boundary_limits_and_literal_queries(tmp_path):
    events = [cpu_op("outer", 0, 100), cpu_op("a.b[0]", 10, 5.5), cpu_op("axb[0]", 20, 5),
              cpu_op("a.b[0]", 500, 2, tid=300)]
    table = make_table(events, tmp_path)
    tracks = {t["tid"]: t["id"] for t in build_timeline_index(table).tracks}
    result = search_timeline(table, "A.B[0]")  # literal: "." and "[" are not patterns
    assert result["names"] == ["a.b[0]"] and result["name_count"] == 1
    assert result["matches"] == [
        {"id": 1, "name": "a.b[0]", "track": tracks["200"], "depth": 1, "ts": 10.0,
         "dur": 5.5},
        {"id": 3, "name": "a.b[0]", "track": tracks["300"], "depth": 0, "ts": 500.0,
         "dur": 2.0}]
    # paging: from start_us on, inclusive
    assert [m["ts"] for m in search_timeline(table, "a.b", start_us=500)["matches"]] == [500.0]
    assert search_timeline(table, "a.b", start_us=500.001)["matches"] == []
    for limit, shown in ((0, 0), (-3, 0), (1, 1), (2, 2), (3, 2)):
        page = search_timeline(table, "a.b", limit=limit)
        assert (len(page["matches"]), page["total"], page["truncated"]) == (
            shown, 2, shown < 2), limit


def test_search_lists_at_most_50_names_but_counts_all(tmp_path):
    events = [cpu_op(f"op{i:02d}", i * 10, 5) for i in range(60)]
    result = search_timeline(make_table(events, tmp_path), "OP", limit=5)
    assert result["name_count"] == 60 and len(result["names"]) == 50
    assert result["total"] == 60 and len(result["matches"]) == 5 and result["truncated"]
    assert [m["name"] for m in result["matches"]] == ["op00", "op01", "op02", "op03", "op04"]


def test_steps_touching_the_window_edges_are_in_it(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 100), step(3, 200, 100), step(4, 300, 100),
              cpu_op("a", 5, 10)]
    table = make_table(events, tmp_path)
    steps = build_timeline(table, start_us=100, end_us=200, width=100)["steps"]
    # step 1 ends at the window start, step 3 starts at its end: both overlap [100, 200]
    assert steps == {"total": 3, "capped": False, "name": ["1", "2", "3"],
                     "start": [-100, 0, 100], "end": [0, 100, 200]}
    inside = build_timeline(table, start_us=100.5, end_us=199.5, width=99)["steps"]
    assert inside["name"] == ["2"]


def test_numeric_pids_sort_by_number(tmp_path):
    events = [{**cpu_op("a", 0, 1), "pid": pid} for pid in (100, 5, 20)]
    assert [t[1] for t in _tracks(events, tmp_path)] == ["process 5", "process 20",
                                                         "process 100"]


def test_gpu_by_process_label_and_stream_tids(tmp_path):
    # no device kernel on pid 3, but its label starts with "GPU": a GPU track, its tid a stream;
    # a label "gpu 4" (lower case) does not count
    events = [{**cpu_op("a", 0, 1), "pid": 3, "tid": 9},
              _meta("process_labels", 3, 0, labels="GPU 3"),
              {**cpu_op("b", 0, 1), "pid": 4, "tid": 9},
              _meta("process_labels", 4, 0, labels="gpu 4"),
              {**kernel(0, 1), "tid": "stream 12"}]  # a tid already named "stream ..."
    assert _tracks(events, tmp_path) == [
        ("cpu", "process 4 (gpu 4)", "thread 9"),
        ("gpu", "GPU 0", "stream 12"),
        ("gpu", "GPU 3 (GPU 3)", "stream 9"),
    ]


def test_an_event_without_pid_is_drawn_on_a_no_pid_lane(tmp_path):
    event = cpu_op("a", 0, 1)
    del event["pid"]
    assert _tracks([event], tmp_path) == [("other", "(no pid)", "thread 200")]


def test_merge_levels_edge_bins():
    inf = np.inf
    # gaps of 0 (instants at one tick) merge at the first bin, 1
    assert [(b, x.tolist()) for b, x in merge_levels(np.array([inf, 0, 0, 0]), 2)] == [
        (0.0, [0, 1, 2, 3, 4]), (1.0, [0, 4])]
    # a gap equal to the kept level's bin starts a block there
    gap = np.array([inf, 1, 1, 1, 1, 1, 2, 1])
    assert [(b, x.tolist()) for b, x in merge_levels(gap, 8)] == [
        (0.0, list(range(9))), (2.0, [0, 6, 8]), (4.0, [0, 8])]
    # times are in [0, span): a gap can be span - 1 = 2; the bins reach 4 > 2
    assert [(b, x.tolist()) for b, x in merge_levels(np.array([inf, 2, 2, 2]), 3)] == [
        (0.0, [0, 1, 2, 3, 4]), (4.0, [0, 4])]


def test_tick_is_1_ns_until_the_keys_could_overflow():
    # (extent ns / tick + 2) * (n + 1) must stay below 2**62; with n + 1 = 2**19 that is
    # extent ns + 2 < 2**43 = 8796093022208: 1 ns above the limit, then 1 ns below it
    assert _tick_ns(8796093022.207, 2**19 - 1) == 10
    assert _tick_ns(8796093022.205, 2**19 - 1) == 1
    assert _tick_ns(8796093022.207, 2**19 - 2) == 1  # one row fewer
    assert _tick_ns(8796093022.207 * 100, 2**19 - 1) == 1000  # 10 and 100 are still too fine
    assert _tick_ns(1e300, 0) == 1  # nothing drawn: no keys


def test_last_metadata_entry_wins(tmp_path):
    events = [_meta("process_name", CPU_PID, 0, name="first"),
              _meta("process_name", CPU_PID, 0, name="second"),
              _meta("thread_name", CPU_PID, 200, name="t1"),
              _meta("thread_name", CPU_PID, 200, name="  t2  "),  # stripped
              cpu_op("a", 0, 1)]
    assert _tracks(events, tmp_path) == [("cpu", f"second ({CPU_PID})", "t2")]


def test_drawn_events_slices_instants_not_counters(tmp_path):
    events = [cpu_op("x", 0, 10),
              {"ph": "i", "s": "t", "name": "inst", "pid": CPU_PID, "tid": 200, "ts": 5},
              {"ph": "I", "s": "t", "name": "inst2", "pid": CPU_PID, "tid": 200, "ts": 6},
              {"ph": "C", "name": "ctr", "pid": CPU_PID, "tid": 200, "ts": 7,
               "args": {"v": 1}},
              {"ph": "X", "name": "nodur", "pid": CPU_PID, "tid": 200, "ts": 8, "cat": "x"}]
    table = make_table(events, tmp_path)
    index = build_timeline_index(table)
    names = table.events["name"].astype(str).tolist()
    drawn = {names[int(e)]: (int(index.starts(np.array([p]))[0]),
                             int(index.ends(np.array([p]))[0]))
             for p, e in enumerate(index.event)}
    # ticks (ns) from the first start; an instant or a slice without dur is zero-length
    assert drawn == {"x": (0, 10_000), "inst": (5_000, 5_000), "inst2": (6_000, 6_000),
                     "nodur": (8_000, 8_000)}
    assert index.position[names.index("ctr")] == -1


def _flow_event(ph: str, cat: str, flow_id: Any, ts: float, tid: Any = 200) -> dict[str, Any]:
    event = {"ph": ph, "cat": cat, "name": cat, "id": flow_id, "pid": CPU_PID, "tid": tid,
             "ts": ts}
    if ph == "f":
        event["bp"] = "e"
    return event


def test_flow_pairs_by_category_and_id_earliest_end_wins(tmp_path):
    events = [cpu_op("A", 0, 10), cpu_op("B", 20, 10), cpu_op("C", 40, 10, tid=300),
              _flow_event("s", "fwdbwd", 1, 5), _flow_event("f", "fwdbwd", 1, 25),
              _flow_event("s", "fwdbwd", 1, 45, tid=300),  # the same id later: ignored
              _flow_event("s", "ac2g", 1, 8), _flow_event("f", "ac2g", 1, 42, tid=300),
              _flow_event("s", "ac2g", 2, 9),                 # no f: no pair
              _flow_event("f", "ac2g", 3, 26),                # no s: no pair
              _flow_event("s", "ac2g", 4, 1, tid=999),        # on no drawn track
              _flow_event("f", "ac2g", 4, 2),
              _flow_event("s", "ac2g", 5, 60), _flow_event("f", "ac2g", 5, 70),  # outside ops
              _flow_event("s", "ac2g", 6, 3), _flow_event("f", "ac2g", 6, 65)]  # first by lo
    table = make_table(events, tmp_path)
    index = build_timeline_index(table)
    names = table.events["name"].astype(str).tolist()
    track = {t["tid"]: t["id"] for t in index.tracks}
    flows = index.flows
    got = [(index.flow_cats[int(flows["cat"][k])], float(flows["id"][k]),
            int(flows["track_s"][k]), int(flows["tick_s"][k]),
            names[int(index.event[flows["pos_s"][k]])] if flows["pos_s"][k] >= 0 else None,
            int(flows["track_f"][k]), int(flows["tick_f"][k]),
            names[int(index.event[flows["pos_f"][k]])] if flows["pos_f"][k] >= 0 else None)
           for k in range(len(flows["cat"]))]
    # ordered by the earlier end (lo); ticks are ns from the first event (0 us)
    assert got == [
        ("ac2g", 6.0, track["200"], 3000, "A", track["200"], 65000, None),
        ("fwdbwd", 1.0, track["200"], 5000, "A", track["200"], 25000, "B"),
        ("ac2g", 1.0, track["200"], 8000, "A", track["300"], 42000, "C"),
        ("ac2g", 5.0, track["200"], 60000, None, track["200"], 70000, None),
    ]
    assert flows["lo"].tolist() == [3000, 5000, 8000, 60000]
    assert flows["hi"].tolist() == [65000, 25000, 42000, 70000]
    assert flows["by_hi"].tolist() == [1, 2, 0, 3]
    assert flows["hi_sorted"].tolist() == [25000, 42000, 65000, 70000]


def test_merge_threshold_by_hand():
    start = np.array([0, 20, 30, 0, 3])
    end = np.array([10, 21, 31, 1, 3])
    row = np.array([0, 0, 0, 1, 1])
    # pair threshold max(previous dur, dur, gap between); a row's first event: inf
    assert merge_threshold(start, end, row).tolist() == [math.inf, 10.0, 9.0, math.inf, 2.0]
    assert merge_threshold(np.array([4]), np.array([9]), np.array([0])).tolist() == [math.inf]
    assert merge_threshold(np.zeros(0), np.zeros(0), np.zeros(0)).size == 0


def test_level_for_picks_the_coarsest_bin_at_most_the_merge_size(tmp_path):
    # 1 ns events in pairs 1 ns apart, pairs of pairs 6 ns apart, then 40 ns: several levels
    events, t = [], 0
    for i in range(64):
        events.append(cpu_op("a", t / 1000, 0.001))
        t += 1 + (1 if i % 2 == 0 else 6 if i % 4 == 1 else 40)
    table = make_table(events, tmp_path)
    index = build_timeline_index(table)
    assert len(index.levels) >= 3
    for k, (bin_ticks, bounds) in enumerate(index.levels):
        assert level_for(index, bin_ticks) is bounds  # a bin equal to the size counts
        if k:
            assert level_for(index, bin_ticks - 0.5) is index.levels[k - 1][1]
    assert level_for(index, 1e18) is index.levels[-1][1]
    assert level_for(index, -1.0) is index.levels[0][1]


def test_tick_with_one_row_and_concat_ranges():
    assert _tick_ns(3e15, 1) == 10  # (3e18 + 2) * 2 >= 2**62
    assert _tick_ns(3e15, 0) == 1
    assert concat_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert concat_ranges(np.array([5]), np.array([0])).tolist() == []
    assert concat_ranges(np.array([2**40]), [2]).tolist() == [2**40, 2**40 + 1]


def test_flows_with_only_start_events_make_no_pairs(tmp_path):
    index = build_timeline_index(make_table([cpu_op("A", 0, 10),
                                             _flow_event("s", "ac2g", 1, 5)], tmp_path))
    assert index.flow_cats == [] and all(v.size == 0 for v in index.flows.values())
