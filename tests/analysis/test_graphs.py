"""CUDA/HIP graphs (issue 25 items 1-3) on hand-built traces: every expected number is derived
in the docstrings from the events written here."""

import numpy as np
import pytest

from tb_plugin.analysis.gpu_idle import critical_path
from tb_plugin.analysis.gpu_idle.idle import queue_lengths
from tb_plugin.analysis.gpu_idle.launch_stats import annotation_breakdown, launch_stats
from tb_plugin.analysis.gpu_idle.view import build_gpu_idle
from tb_plugin.analysis.graph_launches import (
    GRAPH_LAUNCH_RE,
    backlog,
    capture_windows,
    captured_launch_rows,
)
from tb_plugin.analysis.graphs import (
    CAPTURE_NOTE,
    TOP_OWNERS,
    graph_annotations,
    graph_summary,
    merge_capture,
)
from tb_plugin.analysis.kernels import GROUP_BY_KERNEL_OP, kernel_table
from tb_plugin.analysis.overview import build_overview

from .helpers import cpu_op, kernel, make_table, runtime, step


@pytest.mark.parametrize("name, graph", [
    ("cudaGraphLaunch", True), ("cudaGraphLaunch_v10000", True), ("hipGraphLaunch", True),
    ("cuGraphLaunch", True), ("cuGraphLaunch_ptsz", True),
    ("cudaGraphLaunchX", False), ("cudaGraphInstantiate", False), ("cudaLaunchKernel", False),
    ("xcudaGraphLaunch", False),
])
def test_graph_launch_names(name, graph):
    assert bool(GRAPH_LAUNCH_RE.search(name)) is graph


def _replay_events():
    """Annotation "decode" [0,500) holds graph launch G1 [100,150) (3 kernels: 30+20+10 us at
    200, 230, 250); aten::mm [600,700) launches K [620,660) from [610,615); graph launch G2
    [800,810), outside everything, replays 2 kernels of 5 us at 815 and 820."""
    return [
        step(1, 0, 1000),
        cpu_op("decode", 0, 500, cat="user_annotation"),
        runtime(100, 50, corr=10, name="cudaGraphLaunch_v10000"),
        kernel(200, 30, corr=10, name="k_a"), kernel(230, 20, corr=10, name="k_b"),
        kernel(250, 10, corr=10, name="k_c"),
        cpu_op("aten::mm", 600, 100, ext=5), runtime(610, 5, corr=11, ext=5),
        kernel(620, 40, corr=11),
        runtime(800, 10, corr=12, name="hipGraphLaunch"),
        kernel(815, 5, corr=12, name="k_d"), kernel(820, 5, corr=12, name="k_e"),
    ]


@pytest.fixture
def replay(tmp_path):
    return make_table(_replay_events(), tmp_path)


def test_summary_counts_and_attribution(replay):
    """5 replayed kernels (3 + 2) of 60 + 10 us by 2 launches of 50 + 10 us; G1's kernels are
    attributed to "decode" (an annotation), G2's to nothing (no op, no annotation)."""
    s = graph_summary(replay)
    assert s["mode"] == "replay"
    assert (s["launches"], s["launch_us"]) == (2, 60.0)
    assert (s["replayed_kernels"], s["replayed_kernel_us"]) == (5, 70.0)
    assert s["attributed_kernel_us"] == 60.0
    assert s["owners"] == [{"name": "decode", "kind": "annotation", "kernels": 3,
                            "kernel_us": 60.0}]
    assert s["captured_launches"] == 0 and s["backlog"] == []


def test_graph_is_one_launch_of_n_kernels(replay):
    """Per launch: G1 cpu 50 gpu 60 delay 200−150 = 50; mm cpu 5 gpu 40 delay 5; G2 cpu 10
    gpu 10 delay 5. Σ cpu = 65 (charged per kernel it was 50·3 + 5 + 10·2 = 175). Short
    (gpu < cpu, strict): none, G2 sits on the boundary (10 = 10). Runtime outliers at cutoff
    10: G1 only (G2's 10 is not > 10)."""
    stats = launch_stats(replay, runtime_cutoff_us=10.0, delay_cutoff_us=5.0)
    assert stats["kernels"] == 6
    assert stats["cpu_us_total"] == 65.0 and stats["gpu_us_total"] == 110.0
    assert stats["short_kernels"] == 0
    assert stats["runtime_outliers"] == 1
    assert stats["delay_outliers"] == 1  # G1's 50 > 5; the two 5s are not
    assert stats["median_delay_us"] == 5.0 and stats["mean_delay_us"] == 20.0
    assert [o["name"] for o in stats["top_runtime_outliers"]] == ["k_a"]


def _row(table, name: str) -> int:
    [row] = np.flatnonzero(table.events["name"].astype(str).to_numpy() == name)
    return int(row)


def test_outlier_rows_name_the_first_kernel_and_the_launch(replay):
    """G1 is the only runtime outlier at cutoff 10 (cpu 50): its first kernel k_a at 200, gpu
    30 + 20 + 10 = 60, delay 200 - 150 = 50."""
    stats = launch_stats(replay, runtime_cutoff_us=10.0, delay_cutoff_us=5.0)
    g1 = {"event": _row(replay, "k_a"), "launch_event": _row(replay, "cudaGraphLaunch_v10000"),
          "name": "k_a", "start_us": 200.0, "cpu_us": 50.0, "gpu_us": 60.0, "delay_us": 50.0}
    assert stats["top_runtime_outliers"] == [g1]
    assert stats["top_delay_outliers"] == [g1]  # 50 > 5; the two delays of 5 are not


def test_annotation_counts_every_kernel_of_a_graph_launch(replay):
    """"decode" [0, 500) holds G1's launch: its 3 kernels (not 1 launch), 60 us; the step
    marker is no annotation; G2 and aten::mm's launch lie outside it."""
    assert annotation_breakdown(replay) == [{"side": "host", "name": "decode", "ranges": 1,
                                             "wall_us": 500.0, "gpu_us": 60.0, "kernels": 3}]


def test_graph_annotations_only_for_replayed_kernels(replay):
    """k_a (G1, inside "decode") gets "decode"; k_d (G2, outside every annotation), the
    kernel aten::mm launched and a row that is not a device event get ""."""
    rows = np.array([_row(replay, "k_a"), _row(replay, "k_d"), _row(replay, "aten::mm"),
                     _row(replay, "void gemm_kernel<float>()"), _row(replay, "k_b")])
    assert graph_annotations(replay, rows).tolist() == ["decode", "", "", "", "decode"]


def test_graph_short_on_the_other_side(tmp_path):
    """G2 again with 9.5 us of kernels under a 10 us launch: now short (9.5 < 10)."""
    table = make_table([step(1, 0, 100), runtime(10, 10, corr=1, name="cudaGraphLaunch"),
                        kernel(25, 5, corr=1), kernel(30, 4.5, corr=1)], tmp_path)
    stats = launch_stats(table, runtime_cutoff_us=50.0, delay_cutoff_us=100.0)
    assert (stats["kernels"], stats["short_kernels"], stats["short_kernel_gpu_us"]) == (
        2, 1, 9.5)


def test_queue_counts_a_graph_once(replay):
    """One stream: G1 queued [100,200), mm [610,620), G2 [800,815): never more than one entry
    (charged per kernel, G1 alone made 3); full at length 1 for 100 + 10 + 15 = 125 us."""
    [stream] = queue_lengths(replay, queue_full=1)
    assert stream["max"] == 1 and stream["full_us"] == 125.0


def test_critical_path_graph_launch_is_not_blocking(tmp_path):
    """G [10,40) replays K1 [20,30) and K2 [30,50): the kernels run while the call is still
    enqueueing. A graph launch is asynchronous, so K1 does not bind G (a synchronous copy
    would); the path is K2 ← K1: kernel 30, idle before K1 20 (no dependency ends before it),
    host compute after K2 50, launch 0."""
    table = make_table([step(1, 0, 100), runtime(10, 30, corr=1, name="cudaGraphLaunch"),
                        kernel(20, 10, corr=1), kernel(30, 20, corr=1)], tmp_path)
    [one] = critical_path.critical_paths(table)["steps"]
    assert one["shares_us"] == {"host_compute": 50.0, "launch": 0.0, "runtime": 0.0,
                                "kernel": 30.0, "sync": 0.0, "idle": 20.0, "backlog": 0.0}


def _backlog_table(tmp_path, delays):
    """Launch i at 100·i for 5 us, its kernel (10 us) `delays[i]` after the call ends."""
    events = [step(1, 0, 20_000)]
    for i, delay in enumerate(delays):
        events += [runtime(100 * i, 5, corr=i + 1), kernel(100 * i + 5 + delay, 10, corr=i + 1)]
    return make_table(events, tmp_path)


@pytest.mark.parametrize("delays, offset", [
    ((1000.0, 5000.0), 1000.0),  # smallest delay at the boundary, 2 launches: flagged
    ((999.5, 5000.0), None),  # just below
    ((1000.0,), None),  # one launch is not enough
])
def test_backlog_boundaries(tmp_path, delays, offset):
    found = backlog(_backlog_table(tmp_path, delays))
    assert [b["offset_us"] for b in found] == ([] if offset is None else [offset])
    if offset is not None:
        assert found[0]["message"].startswith("GPU 0: kernels start ~1.0 ms after their launch")


def test_backlog_is_not_launch_time_on_the_critical_path(tmp_path):
    """Delays 1000 and 5000: L1 [0,5) → K1 [1005,1015), L2 [100,105) → K2 [5105,5115). Path
    from K2: K1 ended after L2, so the stream edge binds: idle [1015,5105) = 4090, kernel 10;
    K1 ← L1 (launch edge): the wait [5,1005) = 1000 ≥ 1 ms is backlog, not launch; kernel
    10; L1 itself launch 5. After K2: host compute 20000 − 5115. With a wait of 999.5 the
    same wait is launch time: 999.5 + 5."""
    table = _backlog_table(tmp_path, (1000.0, 5000.0))
    [one] = critical_path.critical_paths(table)["steps"]
    assert one["shares_us"] == {"host_compute": 20_000.0 - 5115.0, "launch": 5.0,
                                "runtime": 0.0, "kernel": 20.0, "sync": 0.0, "idle": 4090.0,
                                "backlog": 1000.0}
    below = critical_path.critical_paths(_backlog_table(tmp_path, (999.5, 5000.0)))
    shares = below["steps"][0]["shares_us"]
    assert (shares["backlog"], shares["launch"]) == (0.0, 1004.5)


def _capture_events(with_window=True):
    """Begin [10,12); aten::mm [20,30) launches at 22; aten::add [40,50) launches at 42;
    GetCaptureInfo at 50 (not a launch); cudaMemcpyAsync at 55 (no op); End [60,65); a launch
    at 65 (outside: the window is [10,65)) runs kernel [80,85)."""
    events = [
        step(1, 0, 200),
        cpu_op("aten::mm", 20, 10, ext=1), runtime(22, 3, corr=5, ext=1),
        cpu_op("aten::add", 40, 10, ext=2), runtime(42, 3, corr=6, ext=2),
        runtime(50, 1, corr=7, name="cudaStreamGetCaptureInfo"),
        runtime(55, 2, corr=8, name="cudaMemcpyAsync"),
        runtime(65, 3, corr=9), kernel(80, 5, corr=9),
    ]
    if with_window:
        events += [runtime(10, 2, corr=3, name="cudaStreamBeginCapture"),
                   runtime(60, 5, corr=4, name="cudaStreamEndCapture")]
    return events


def test_capture_trace_is_labelled_and_excluded(tmp_path):
    table = make_table(_capture_events(), tmp_path)
    s = graph_summary(table)
    assert (s["mode"], s["captured_launches"], s["capture_windows"]) == ("capture", 3, 1)
    assert s["notes"] == [CAPTURE_NOTE]
    overview = build_overview(table)
    [gpu] = overview["gpus"]
    assert gpu["utilization_pct"] is None and gpu["mfu_pct"] is None
    assert gpu["sm_efficiency_pct"] is None and gpu["achieved_occupancy_pct"] is None
    assert CAPTURE_NOTE in overview["notes"]
    idle = build_gpu_idle(table)
    assert idle["applicable"] is False and idle["message"] == CAPTURE_NOTE
    assert idle["graphs"]["mode"] == "capture"


def test_same_trace_without_capture_window(tmp_path):
    table = make_table(_capture_events(with_window=False), tmp_path)
    assert graph_summary(table)["mode"] == "none"
    [gpu] = build_overview(table)["gpus"]
    assert gpu["utilization_pct"] == pytest.approx(100.0 * 5 / 200)
    assert build_gpu_idle(table)["applicable"] is True


def test_merge_capture_by_kernel_order(tmp_path):
    """The window's 3 launches, in call order: aten::mm, aten::add, the memcpy (no op). A
    replay of 3 kernels takes them in start order; a replay of 2 matches no window."""
    capture = make_table(_capture_events(), tmp_path)
    replay3 = make_table([step(1, 0, 100), runtime(10, 5, corr=1, name="hipGraphLaunch"),
                          kernel(30, 1, corr=1, name="second"), kernel(20, 1, corr=1,
                                                                       name="first"),
                          kernel(40, 1, corr=1, name="third")], tmp_path)
    merged = merge_capture(replay3, capture)
    assert merged["kernel"].tolist() == ["first", "second", "third"]
    assert merged["index"].tolist() == [0, 1, 2]
    assert merged["captured_by"].tolist() == ["aten::mm", "aten::add", ""]
    assert merged["window"].tolist() == [0, 0, 0]
    replay2 = make_table([step(1, 0, 100), runtime(10, 5, corr=1, name="hipGraphLaunch"),
                          kernel(20, 1, corr=1), kernel(30, 1, corr=1)], tmp_path)
    merged = merge_capture(replay2, capture)
    assert merged["window"].tolist() == [-1, -1] and merged["captured_by"].tolist() == ["", ""]


def test_kernel_view_names_the_annotation_around_a_graph_launch(replay):
    """G1's kernels (launch inside "decode", no operator) show "decode" as their operator;
    G2's (no op, no annotation) stay N/A; K keeps its launching operator aten::mm."""
    table = kernel_table(replay, GROUP_BY_KERNEL_OP)
    got = dict(zip(table["name"], table["operator"]))
    assert got == {"k_a": "decode", "k_b": "decode", "k_c": "decode",
                   "void gemm_kernel<float>()": "aten::mm", "k_d": "N/A", "k_e": "N/A"}


def test_kernel_view_leaves_ordinary_kernels_in_annotations_na(tmp_path):
    """The rule is for graph kernels only: a cudaLaunchKernel in "decode" outside any op is
    still N/A (the annotation view covers it)."""
    table = make_table([step(1, 0, 100), cpu_op("decode", 0, 50, cat="user_annotation"),
                        runtime(10, 5, corr=1), kernel(20, 5, corr=1, name="k")], tmp_path)
    frame = kernel_table(table, GROUP_BY_KERNEL_OP)
    assert frame["operator"].tolist() == ["N/A"]


def test_graph_over_two_streams_is_one_entry_per_stream(tmp_path):
    """G [10,20) replays k1 (30) and k2 (40) on stream 7 and k3 (35) on stream 8: one queue
    entry on each stream, until its first kernel there starts: [10,30) and [10,35)."""
    table = make_table([step(1, 0, 100), runtime(10, 10, corr=1, name="cudaGraphLaunch"),
                        kernel(30, 5, corr=1), kernel(40, 5, corr=1),
                        kernel(35, 5, corr=1, stream=8)], tmp_path)
    streams = {s["stream"]: (s["max"], s["full_us"]) for s in queue_lengths(table, 1)}
    assert streams == {7: (1, 20.0), 8: (1, 25.0)}


@pytest.mark.parametrize("delay, backlog_us, launch_us", [(2000.0, 2000.0, 5.0),
                                                          (999.0, 0.0, 1004.0)])
def test_one_long_wait_is_backlog_on_the_path(tmp_path, delay, backlog_us, launch_us):
    """One launch [0,5) and its kernel `delay` later: no GPU-wide backlog (one launch), but on
    the path a wait of ≥ 1 ms is backlog (a kernel waiting on an unlinked event or on work
    from before the window), under it launch."""
    table = _backlog_table(tmp_path, (delay,))
    assert backlog(table) == []
    shares = critical_path.critical_paths(table)["steps"][0]["shares_us"]
    assert (shares["backlog"], shares["launch"]) == (backlog_us, launch_us)


def test_overview_split_counts_a_graph_launch_once(replay):
    """The step [0,1000): Kernel = the union of kernel time 60 + 40 + 10 = 110; Runtime = the
    launch calls outside kernels, each once: 50 + 5 + 10 = 65 (per kernel it would be 175)."""
    overview = build_overview(replay)
    [one] = overview["steps"]
    assert one["breakdown_us"]["Kernel"] == 110.0
    assert one["breakdown_us"]["Runtime"] == 65.0
    assert any(n.startswith("CUDA/HIP graph trace: 2 graph launch(es) replayed 5 kernels")
               for n in overview["notes"])


@pytest.mark.parametrize("delays, shown", [((10_000.0, 30_000.0, 11_000.0), "10 ms"),
                                           ((9_999.0, 30_000.0, 11_000.0), "10.0 ms"),
                                           ((1_250.0, 3_000.0), "1.2 ms")])
def test_backlog_row_every_key(tmp_path, delays, shown):
    """Per GPU: the smallest delay, the median of all, the charged events; whole milliseconds
    from 10 ms on, one decimal below."""
    [row] = backlog(_backlog_table(tmp_path, delays))
    assert row == {"device": 0, "offset_us": min(delays),
                   "median_delay_us": float(np.median(delays)), "events": len(delays),
                   "message": f"GPU 0: kernels start ~{shown} after their launch (every one of "
                              "them): a backlog from before the window or a clock offset, not "
                              "launch time"}


def test_capture_windows_per_thread_and_open_ended(tmp_path):
    """Thread 1: Begin [10,12) .. End [60,65) -> [10, 65); Begin [100,101) without an End:
    [100, inf). Thread 2: an End [5,6) before any Begin is no window. Captured: the launch at
    22 and the memcpy at 130 on thread 1 (inside), not the launch at 70 (between windows), not
    thread 2's launch at 30 (its thread has no window), not the graph launch at 120."""
    table = make_table([
        runtime(10, 2, corr=1, name="cudaStreamBeginCapture"),
        runtime(22, 3, corr=2), runtime(60, 5, corr=3, name="cudaStreamEndCapture"),
        runtime(70, 3, corr=4),
        runtime(100, 1, corr=5, name="hipStreamBeginCapture_spt"),
        runtime(120, 3, corr=6, name="cudaGraphLaunch"),
        runtime(130, 2, corr=7, name="cudaMemcpyAsync"),
        runtime(5, 1, corr=8, name="cudaStreamEndCapture", tid=2),
        runtime(30, 3, corr=9, tid=2),
    ], tmp_path)
    windows = capture_windows(table)
    assert list(zip(windows["start"], windows["end"])) == [(10.0, 65.0), (100.0, np.inf)]
    assert windows["thread"].nunique() == 1
    events = table.events
    assert [(str(events["name"].iat[r]), float(events["ts"].iat[r]))
            for r in captured_launch_rows(table)] == [("cudaLaunchKernel", 22.0),
                                                      ("cudaMemcpyAsync", 130.0)]
    assert len(capture_windows(make_table([runtime(1, 1, corr=1)], tmp_path))) == 0


def test_replay_note_and_owners_by_time_then_name(tmp_path):
    """Three graph launches: G1 inside aten::linear (an operator: 20 us of kernels), G2 inside
    annotation "a" (20 us), G3 inside nothing (10 us): 40 of 50 us attributed, 80.0 %; owners
    by time, ties by name (a before aten::linear)."""
    table = make_table([
        step(1, 0, 1000),
        cpu_op("aten::linear", 0, 100, ext=1),
        runtime(10, 5, corr=1, ext=1, name="cudaGraphLaunch"), kernel(20, 20, corr=1),
        cpu_op("a", 200, 100, cat="user_annotation"),
        runtime(210, 5, corr=2, name="cudaGraphLaunch"), kernel(220, 5, corr=2),
        kernel(230, 15, corr=2),
        runtime(400, 5, corr=3, name="cudaGraphLaunch"), kernel(410, 10, corr=3),
    ], tmp_path)
    s = graph_summary(table)
    assert (s["mode"], s["launches"], s["launch_us"], s["replayed_kernels"],
            s["replayed_kernel_us"], s["attributed_kernel_us"]) == ("replay", 3, 15.0, 4, 50.0,
                                                                     40.0)
    assert s["owners"] == [{"name": "a", "kind": "annotation", "kernels": 2, "kernel_us": 20.0},
                           {"name": "aten::linear", "kind": "operator", "kernels": 1,
                            "kernel_us": 20.0}]
    assert s["notes"] == [
        "CUDA/HIP graph trace: 3 graph launch(es) replayed 4 kernels; each launch is counted "
        "once, and 80.0% of the replayed kernel time is attributed to the operator or "
        "annotation around its launch."]


def test_owners_bounded(tmp_path):
    events = [step(1, 0, 100_000)]
    for i in range(TOP_OWNERS + 1):  # annotation i holds a graph launch of i + 1 us of kernels
        events += [cpu_op(f"ann{i:02d}", 100 * i, 50, cat="user_annotation"),
                   runtime(100 * i + 5, 2, corr=i + 1, name="cudaGraphLaunch"),
                   kernel(100 * i + 10, i + 1, corr=i + 1)]
    s = graph_summary(make_table(events, tmp_path))
    assert [o["name"] for o in s["owners"]] == [f"ann{i:02d}" for i in range(TOP_OWNERS, 0, -1)]


def test_plain_trace_has_no_graph_notes(tmp_path):
    s = graph_summary(make_table([step(1, 0, 100), runtime(10, 5, corr=1),
                                  kernel(20, 10, corr=1)], tmp_path))
    assert (s["mode"], s["launches"], s["replayed_kernels"], s["owners"], s["notes"]) == (
        "none", 0, 0, [], [])
