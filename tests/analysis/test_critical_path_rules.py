"""The GPU Idle critical path (`gpu_idle/critical_path.py`) at its rules, on hand-built steps
whose shares are derived in the comments: the payload's every key, the step chosen for the
highlight (default the first; an unknown one: none), a launch call on the trace's first row,
the backlog threshold (a launch-to-kernel wait of BACKLOG_MIN_US or more) on both sides, and
the MAX_STEPS bound on both sides."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.gpu_idle.critical_path import (
    EDGE_NAMES,
    FORMULA,
    MAX_STEPS,
    critical_paths,
    step_path,
)
from tb_plugin.analysis.graph_launches import BACKLOG_MIN_US

from .helpers import kernel, make_table, memcpy, runtime, step

KERNEL = "void gemm_kernel<float>()"
ZERO = dict.fromkeys(("host_compute", "launch", "runtime", "kernel", "sync", "idle",
                      "backlog"), 0.0)


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    return make_table([step(1, 0, 100), runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                       step(2, 100, 100), runtime(110, 5, corr=2), kernel(150, 10, corr=2)],
                      tmp_path_factory.mktemp("critical"))


def _names(table, rows: list[int]) -> list[tuple[str, float]]:
    events = table.events
    return [(str(events["name"].iat[r]), float(events["ts"].iat[r])) for r in rows]


def test_payload_every_key_and_the_chosen_step(two_steps) -> None:
    # step 1: host [0, 10) and [30, 100) = 80; launch call 5 + wait [15, 20) 5; kernel 10.
    # step 2: host [100, 110) and [160, 200) = 50; launch 5 + wait [115, 150) 35; kernel 10.
    rows = [{"step": "1", "start_us": 0.0, "end_us": 100.0, "length_us": 100.0, "nodes": 2,
             "shares_us": {**ZERO, "host_compute": 80.0, "launch": 10.0, "kernel": 10.0}},
            {"step": "2", "start_us": 100.0, "end_us": 200.0, "length_us": 100.0, "nodes": 2,
             "shares_us": {**ZERO, "host_compute": 50.0, "launch": 40.0, "kernel": 10.0}}]
    first = critical_paths(two_steps)
    assert {k: v for k, v in first.items() if k != "event_ids"} == {
        "formula": FORMULA, "steps": rows, "truncated": False, "step": "1"}
    assert _names(two_steps, first["event_ids"]) == [("cudaLaunchKernel", 10.0), (KERNEL, 20.0)]
    second = critical_paths(two_steps, "2")
    assert (second["steps"], second["step"]) == (rows, "2")
    assert _names(two_steps, second["event_ids"]) == [("cudaLaunchKernel", 110.0),
                                                      (KERNEL, 150.0)]
    unknown = critical_paths(two_steps, "7")
    assert (unknown["steps"], unknown["step"], unknown["event_ids"]) == (rows, None, [])


def test_a_launch_on_the_first_row_is_a_launch(tmp_path) -> None:
    # no step marker: one step [0, 20); the launch call (row 0) [0, 5), its wait [5, 10)
    table = make_table([runtime(0, 5, corr=1), kernel(10, 10, corr=1)], tmp_path)
    [row] = critical_paths(table)["steps"]
    assert row["shares_us"] == {**ZERO, "launch": 10.0, "kernel": 10.0}


@pytest.mark.parametrize("wait, shares", [
    (BACKLOG_MIN_US, {"launch": 5.0, "backlog": BACKLOG_MIN_US}),
    (BACKLOG_MIN_US - 1, {"launch": 5.0 + BACKLOG_MIN_US - 1, "backlog": 0.0})])
def test_backlog_from_a_wait_of_one_millisecond(tmp_path, wait, shares) -> None:
    # launch [0, 5), kernel [5 + wait, 15 + wait); the step is [0, 15 + wait)
    table = make_table([runtime(0, 5, corr=1), kernel(5 + wait, 10, corr=1)], tmp_path)
    [row] = critical_paths(table)["steps"]
    assert row["shares_us"] == {**ZERO, "kernel": 10.0, **shares}


def test_at_most_max_steps(tmp_path) -> None:
    events = [e for i in range(MAX_STEPS + 1)
              for e in (step(i, 100 * i, 100), runtime(100 * i + 10, 5, corr=i + 1),
                        kernel(100 * i + 20, 10, corr=i + 1))]
    over = critical_paths(make_table(events, tmp_path))
    assert over["truncated"] and [r["step"] for r in over["steps"]] == [
        str(i) for i in range(MAX_STEPS)]
    exact = critical_paths(make_table(events[:3 * MAX_STEPS], tmp_path))
    assert not exact["truncated"] and len(exact["steps"]) == MAX_STEPS


def test_step_path_runs_source_first_with_its_edges(two_steps, tmp_path) -> None:
    path = step_path(two_steps, "2")
    assert (path["step"], path["start_us"], path["end_us"]) == ("2", 100.0, 200.0)
    assert _names(two_steps, path["rows"].tolist()) == [("cudaLaunchKernel", 110.0),
                                                        (KERNEL, 150.0)]
    # the first row has no edge into it; the kernel is bound by its launch
    assert [EDGE_NAMES[e] if e >= 0 else None for e in path["edges"]] == [None, "launch"]
    assert path["edges"].tolist() == [-1, EDGE_NAMES.index("launch")]
    assert step_path(two_steps, "2") is path  # memoised per step
    with pytest.raises(KeyError) as missing:
        step_path(two_steps, "9")
    assert missing.value.args == ("9",)
    # a step past MAX_STEPS has its path too: queued kernels, stream edges
    events = [e for i in range(MAX_STEPS + 1)
              for e in (step(i, 100 * i, 100), runtime(100 * i + 10, 5, corr=i + 1),
                        kernel(100 * i + 20, 10, corr=i + 1))]
    table = make_table(events, tmp_path)
    last = step_path(table, str(MAX_STEPS))
    assert _names(table, last["rows"].tolist()) == [
        ("cudaLaunchKernel", 100.0 * MAX_STEPS + 10), (KERNEL, 100.0 * MAX_STEPS + 20)]
    # a step without nodes between two with: an empty path, and no row in the card
    gap = make_table([step(1, 0, 100), step(2, 100, 100), step(3, 200, 100),
                      runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                      runtime(210, 5, corr=2), kernel(220, 10, corr=2)], tmp_path)
    middle = step_path(gap, "2")
    assert (middle["rows"].tolist(), middle["edges"].tolist()) == ([], [])
    assert (middle["start_us"], middle["end_us"]) == (100.0, 200.0)
    assert [r["step"] for r in critical_paths(gap)["steps"]] == ["1", "3"]
    assert critical_paths(gap, "2")["step"] is None


def test_host_order_is_per_thread(tmp_path) -> None:
    """Thread 1: launch L1 [10,15) -> K1 [20,30), cudaMalloc M [40,45). Thread 2: cudaMalloc X
    [12,35), cudaFree Y [60,70). The sink Y is bound by X (host order on its own thread, not by
    M, which ends later on another thread): Y 10 + X 23 runtime; host compute [0,12), [35,60)
    and [70,100): 12 + 25 + 30."""
    table = make_table([step(1, 0, 100), runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                        runtime(40, 5, corr=90, name="cudaMalloc"),
                        runtime(12, 23, corr=91, name="cudaMalloc", tid=2),
                        runtime(60, 10, corr=92, name="cudaFree", tid=2)], tmp_path)
    result = critical_paths(table)
    [row] = result["steps"]
    assert row["shares_us"] == {**ZERO, "host_compute": 67.0, "runtime": 33.0}
    assert row["nodes"] == 2
    assert _names(table, result["event_ids"]) == [("cudaMalloc", 12.0), ("cudaFree", 60.0)]


def test_stream_order_is_per_stream(tmp_path) -> None:
    """L1 [10,15) -> K1 [20,30) on stream 7; L2 [16,18) -> K2 [40,100) and L3 [19,21) -> K3
    [100,150) on stream 8: K3 is bound by K2 (stream order), K2 by L2 (launch, waiting
    [18,40)), L2 by L1 (host order, gap [15,16)); K1 on the other stream binds nothing.
    Kernel 50 + 60; launch L1 5 + L2 2 + wait 22; host compute [0,10), [15,16), [150,200)."""
    table = make_table([step(1, 0, 200), runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                        runtime(16, 2, corr=2), kernel(40, 60, corr=2, stream=8),
                        runtime(19, 2, corr=3), kernel(100, 50, corr=3, stream=8)], tmp_path)
    result = critical_paths(table)
    [row] = result["steps"]
    assert row["shares_us"] == {**ZERO, "host_compute": 61.0, "launch": 29.0, "kernel": 110.0}
    assert [ts for _, ts in _names(table, result["event_ids"])] == [10.0, 16.0, 40.0, 100.0]
    path = step_path(table, "1")
    assert [EDGE_NAMES[e] if e >= 0 else None for e in path["edges"]] == [
        None, "host_order", "launch", "stream"]


def test_a_synchronous_copy_binds_its_call(tmp_path) -> None:
    """cudaMemcpy [10,50) runs its copy [20,40) and returns after it: the call is bound by the
    copy (blocking), the copy by nothing (the call ends after it). Launch [40,50) 10; the copy
    20 (kernel); idle [0,20) before the copy (no dependency ends before it); host [50,100)."""
    table = make_table([step(1, 0, 100), runtime(10, 40, corr=1, name="cudaMemcpy"),
                        memcpy(20, 20, corr=1)], tmp_path)
    [row] = critical_paths(table)["steps"]
    assert row["shares_us"] == {**ZERO, "idle": 20.0, "kernel": 20.0, "launch": 10.0,
                                "host_compute": 50.0}
    path = step_path(table, "1")
    assert [EDGE_NAMES[e] if e >= 0 else None for e in path["edges"]] == [None, "blocking"]


@pytest.mark.parametrize("sync_end, shares", [
    # the kernel ends with the synchronize call (still running when it started): S waits for
    # it; S adds nothing after K's end. cudaMalloc N [60,65) follows S on the thread.
    (50.0, {"host_compute": 55.0, "runtime": 5.0, "kernel": 30.0, "launch": 10.0}),
    # S outlasts K by 2: that tail is sync time
    (52.0, {"host_compute": 53.0, "runtime": 5.0, "kernel": 30.0, "launch": 10.0, "sync": 2.0}),
])
def test_a_synchronize_call_waits_for_the_running_kernel(tmp_path, sync_end, shares) -> None:
    """L [10,15) -> K [20,50); cudaStreamSynchronize S [30, sync_end) on the same thread, then
    N. Path N <- S (host order) <- K (sync) <- L (launch): host [0,10), [sync_end,60) and
    [65,100); launch L 5 + wait 5; K 30; N 5."""
    table = make_table([step(1, 0, 100), runtime(10, 5, corr=1), kernel(20, 30, corr=1),
                        runtime(30, sync_end - 30, corr=2, name="cudaStreamSynchronize"),
                        runtime(60, 5, corr=3, name="cudaMalloc")], tmp_path)
    [row] = critical_paths(table)["steps"]
    assert row["shares_us"] == {**ZERO, **shares}
    path = step_path(table, "1")
    assert [EDGE_NAMES[e] if e >= 0 else None for e in path["edges"]] == [
        None, "launch", "sync", "host_order"]


def test_a_kernel_done_when_the_synchronize_starts_is_not_waited_for(tmp_path) -> None:
    """K [20,30) ends exactly when S [30,35) starts: S did not wait for it, so S is bound by L
    (host order) and K is off the path: N 5 runtime, S 5 sync, L 5 launch; host [0,10),
    [15,30), [35,60), [65,100)."""
    table = make_table([step(1, 0, 100), runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                        runtime(30, 5, corr=2, name="cudaStreamSynchronize"),
                        runtime(60, 5, corr=3, name="cudaMalloc")], tmp_path)
    [row] = critical_paths(table)["steps"]
    assert row["shares_us"] == {**ZERO, "host_compute": 85.0, "runtime": 5.0, "sync": 5.0,
                                "launch": 5.0}
    assert [EDGE_NAMES[e] if e >= 0 else None for e in step_path(table, "1")["edges"]] == [
        None, "host_order", "host_order"]


def test_step_nodes_start_inside_the_half_open_step(tmp_path) -> None:
    """Steps [0,100) and [100,200): cudaMalloc M1 at 0 (the step's first instant) is step 1's
    only node; M2 at 100 belongs to step 2 only."""
    table = make_table([step(1, 0, 100), step(2, 100, 100),
                        runtime(0, 5, corr=1, name="cudaMalloc"),
                        runtime(100, 5, corr=2, name="cudaMalloc")], tmp_path)
    rows = critical_paths(table)["steps"]
    assert [(r["step"], r["nodes"], r["shares_us"]) for r in rows] == [
        ("1", 1, {**ZERO, "runtime": 5.0, "host_compute": 95.0}),
        ("2", 1, {**ZERO, "runtime": 5.0, "host_compute": 95.0})]


def test_no_steps_no_paths(tmp_path) -> None:
    assert critical_paths(make_table([], tmp_path)) == {
        "formula": FORMULA, "steps": [], "truncated": False, "step": None, "event_ids": []}


def test_work_from_before_the_step_counts_from_the_step_start(tmp_path) -> None:
    """Steps [20,100) and [100,200). L0 [5,10) (before every step) launched K0 [90,130); step
    2's L2 [105,110) launched K2 [130,150), queued behind K0 on the stream. Step 2's path: K2
    (20) <- K0 (stream), counted from the step start: [100,130) 30; then host [150,200)."""
    table = make_table([step(1, 20, 80), step(2, 100, 100), runtime(5, 5, corr=1),
                        kernel(90, 40, corr=1), runtime(105, 5, corr=2),
                        kernel(130, 20, corr=2)], tmp_path)
    second = critical_paths(table, "2")
    assert [r["shares_us"] for r in second["steps"] if r["step"] == "2"] == [
        {**ZERO, "kernel": 50.0, "host_compute": 50.0}]
    assert [ts for _, ts in _names(table, second["event_ids"])] == [90.0, 130.0]


def test_a_dependency_ending_at_the_step_start_ends_the_path(tmp_path) -> None:
    """The step [95,195) starts when launch L [90,95) (the trace's first row) ends; its kernel
    K [110,120) is the step's only node. The path stops at K: the wait [95,110) is launch
    time (K's edge), not idle; host after it [120,195)."""
    table = make_table([runtime(90, 5, corr=1), step(1, 95, 100), kernel(110, 10, corr=1)],
                       tmp_path)
    assert int(table.events["ts"].to_numpy().argmin()) == 0
    result = critical_paths(table)
    [row] = result["steps"]
    assert (row["nodes"], row["shares_us"]) == (1, {**ZERO, "launch": 15.0, "kernel": 10.0,
                                                    "host_compute": 75.0})
    assert _names(table, result["event_ids"]) == [(KERNEL, 110.0)]


def test_a_host_call_ending_at_the_step_start_ends_the_path(tmp_path) -> None:
    """cudaMalloc M1 [90,100) ends exactly at step 2's start; M2 [110,115) follows it on the
    thread: step 2's path is M2 alone, with host compute [100,110) before it."""
    table = make_table([step(1, 0, 100), step(2, 100, 100),
                        runtime(90, 10, corr=1, name="cudaMalloc"),
                        runtime(110, 5, corr=2, name="cudaFree")], tmp_path)
    rows = {r["step"]: r for r in critical_paths(table, "2")["steps"]}
    assert (rows["2"]["nodes"], rows["2"]["shares_us"]) == (
        1, {**ZERO, "runtime": 5.0, "host_compute": 95.0})
