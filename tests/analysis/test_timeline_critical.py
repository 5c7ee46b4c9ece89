"""The critical path laid over `/timeline` (`critical_step`): the events marked in the level-of-
detail payload are the path's, on a hand-built trace whose paths are derived in the comments."""

import numpy as np
import pytest

from tb_plugin.analysis.timeline.critical import MAX_EDGES
from tb_plugin.analysis.timeline.view import build_timeline
from tb_plugin.views.errors import NotInTrace
from tb_plugin.views.registry import build_view

from .helpers import cpu_op, kernel, make_table, runtime, step


def _events():
    """Step 1 [0,100): A = launch [10,15) -> K1 [20,60); B = launch [20,25) -> K2 [60,80)
    (queued behind K1); S = cudaDeviceSynchronize [30,82) waits for K2. Binding predecessors:
    S <- K2 (sync edge, ends 80 > B's 25), K2 <- K1 (stream, 60 > B's 25), K1 <- A (launch),
    A: none. Path A, K1, K2, S; B is a node off the path. Step 2 [100,200): C = launch
    [110,115) -> K3 [120,150); C's host predecessor S ends at 82, before the step: path C, K3.
    aten::add [85,95) is no node (not a runtime call). Step 3 [200,250) (launch D [210,215) ->
    K4 [220,230)) keeps step 2 from being the trimmed last step."""
    return [
        step(1, 0, 100), step(2, 100, 100),
        runtime(10, 5, corr=1), kernel(20, 40, corr=1, name="K1"),
        runtime(20, 5, corr=2, name="cudaLaunchKernelB"), kernel(60, 20, corr=2, name="K2"),
        runtime(30, 52, corr=9, name="cudaDeviceSynchronize"),
        cpu_op("aten::add", 85, 10),
        runtime(110, 5, corr=3, name="cudaLaunchKernelC"), kernel(120, 30, corr=3, name="K3"),
        step(3, 200, 50), runtime(210, 5, corr=4, name="cudaLaunchKernelD"),
        kernel(220, 10, corr=4, name="K4"),
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return make_table(_events(), tmp_path_factory.mktemp("crit"))


def _row(table, name: str) -> int:
    [row] = np.flatnonzero(table.events["name"].astype(str).to_numpy() == name)
    return int(row)


def _marked(payload) -> set[int]:
    return {r["events"]["id"][i] for t in payload["tracks"] for r in t["rows"]
            for i in r["events"]["path"]}


def test_marked_events_are_the_steps_path(table):
    a, k1, k2, s = (_row(table, n) for n in ("cudaLaunchKernel", "K1", "K2",
                                             "cudaDeviceSynchronize"))
    payload = build_timeline(table, width=2000, critical_step="1")  # 0.1 us/px: no blocks
    assert _marked(payload) == {a, k1, k2, s}
    crit = payload["critical"]
    assert (crit["step"], crit["start_us"], crit["end_us"], crit["nodes"]) == ("1", 0.0, 100.0, 4)
    edges = crit["edges"]
    assert list(zip(edges["from_id"], edges["to_id"])) == [(a, k1), (k1, k2), (k2, s)]
    assert [edges["kinds"][k] for k in edges["kind"]] == ["launch", "stream", "sync"]
    # from the predecessor's end to where it bound the node (origin 0 = the trace start)
    assert edges["from_ts"] == [15, 60, 80] and edges["to_ts"] == [20, 60, 80]
    assert all(r["blocks"]["path"] == [] for t in payload["tracks"] for r in t["rows"])


def test_second_step_and_window(table):
    c, k3 = _row(table, "cudaLaunchKernelC"), _row(table, "K3")
    payload = build_timeline(table, 100.0, 200.0, width=1000, critical_step="2")
    assert _marked(payload) == {c, k3}
    edges = payload["critical"]["edges"]
    assert (edges["from_id"], edges["to_id"], edges["total"]) == ([c], [k3], 1)
    assert edges["from_ts"] == [15] and edges["to_ts"] == [20]  # relative to 100


def test_blocks_holding_path_events_are_marked(table):
    """At 50 us per pixel rows merge into blocks: a block is marked exactly when it contains
    one of the path's events of its track (CPU: A [10,15), S [30,82); GPU: K1 [20,60),
    K2 [60,80)); rows hold disjoint events, so a block of off-path events contains none."""
    path = {"cpu": [(10, 15), (30, 82)], "gpu": [(20, 60), (60, 80)]}
    path_names = {"cudaLaunchKernel", "cudaDeviceSynchronize", "K1", "K2"}
    payload = build_timeline(table, 0.0, 200.0, width=4, critical_step="1")
    names = payload["names"]
    marked_blocks = 0
    for track in payload["tracks"]:
        for r in track["rows"]:
            bl, ev = r["blocks"], r["events"]
            expected = [i for i, (b0, b1) in enumerate(zip(bl["start"], bl["end"]))
                        if any(b0 <= p0 and p1 <= b1 for p0, p1 in path[track["kind"]])]
            assert bl["path"] == expected
            marked_blocks += len(expected)
            assert ev["path"] == [i for i, code in enumerate(ev["name"])
                                  if names[code] in path_names]
    assert marked_blocks == 2  # one block on the launching thread, one on the stream


def test_unknown_step_and_default_payload(table):
    with pytest.raises(KeyError):
        build_timeline(table, critical_step="no-such-step")
    with pytest.raises(NotInTrace, match="no step 'nope'"):
        build_view(table, "timeline", critical_step="nope")
    plain = build_timeline(table, width=2000)
    assert "critical" not in plain
    assert all("path" not in r["events"] for t in plain["tracks"] for r in t["rows"])


def test_a_window_beside_the_path_has_no_edges(table):
    """Step 1's edges lie in [15, 80]: a window [150, 200] touches none (and holds none of its
    events), so every edge list is empty; [80, 200] touches the last edge (K2 -> S at 80)."""
    payload = build_timeline(table, 150.0, 200.0, width=1000, critical_step="1")
    assert _marked(payload) == set()
    crit = payload["critical"]
    assert (crit["step"], crit["start_us"], crit["end_us"], crit["nodes"]) == ("1", 0.0, 100.0, 4)
    edges = crit["edges"]
    assert (edges["total"], edges["capped"], edges["kind"]) == (0, False, [])
    assert all(edges[f"{side}_{key}"] == [] for side in ("from", "to")
               for key in ("track", "depth", "ts", "id"))
    k2, s = _row(table, "K2"), _row(table, "cudaDeviceSynchronize")
    edges = build_timeline(table, 80.0, 200.0, width=1000, critical_step="1")["critical"]["edges"]
    assert (edges["total"], edges["from_id"], edges["to_id"]) == (1, [k2], [s])
    assert edges["from_ts"] == [0] and edges["to_ts"] == [0]  # both at 80, relative to 80


@pytest.mark.parametrize("n", [MAX_EDGES + 100, MAX_EDGES])
def test_edges_are_sampled_evenly_above_max_edges(tmp_path, n):
    """n launches [0.1 i, 0.1 i + 0.05) of kernels queued back to back [1000 + i,
    1001 + i): the path is L0, K0, K1, ..., K(n-1) (n edges: launch, then stream order);
    above MAX_EDGES an even sample of MAX_EDGES is sent, first and last included."""
    events = [step(1, 0, 4000)]
    for i in range(n):
        events += [runtime(0.1 * i, 0.05, corr=i + 1), kernel(1000 + i, 1, corr=i + 1)]
    table = make_table(events, tmp_path)
    payload = build_timeline(table, width=1000, critical_step="1")
    edges = payload["critical"]["edges"]
    assert (edges["total"], edges["capped"], len(edges["kind"])) == (
        n, n > MAX_EDGES, MAX_EDGES)
    assert payload["critical"]["nodes"] == n + 1
    keep = np.linspace(0, n - 1, MAX_EDGES).astype(np.int64)
    kinds = ["launch"] + ["stream"] * (n - 1)
    assert [edges["kinds"][k] for k in edges["kind"]] == [kinds[i] for i in keep]
    # where each stream edge leaves: the previous kernel's end (relative to the trace start)
    assert edges["from_ts"][1:] == [1000.0 + i for i in keep[1:]]


def _place(payload, event_id: int) -> tuple[int, int]:
    """(track id, row) of an event drawn alone in the payload."""
    [found] = [(t["id"], depth) for t in payload["tracks"] for depth, r in enumerate(t["rows"])
               if event_id in r["events"]["id"]]
    return found


def test_edge_ends_name_their_tracks_and_rows(table):
    a, k1, k2, s = (_row(table, n) for n in ("cudaLaunchKernel", "K1", "K2",
                                             "cudaDeviceSynchronize"))
    payload = build_timeline(table, width=2000, critical_step="1")
    edges = payload["critical"]["edges"]
    assert list(zip(edges["from_track"], edges["from_depth"])) == [
        _place(payload, e) for e in (a, k1, k2)]
    assert list(zip(edges["to_track"], edges["to_depth"])) == [
        _place(payload, e) for e in (k1, k2, s)]


def test_an_edge_starting_at_the_window_end_is_sent(table):
    # A -> K1 runs from A's end (15) to K1's start (20): a window ending at 15 touches it
    a, k1 = _row(table, "cudaLaunchKernel"), _row(table, "K1")
    edges = build_timeline(table, 0.0, 15.0, width=100, critical_step="1")["critical"]["edges"]
    assert (edges["total"], edges["from_id"], edges["to_id"]) == (1, [a], [k1])


def test_the_trace_first_event_on_the_path_is_marked(tmp_path):
    # no step marker: the launch call is the CPU track's first event (index position 0)
    table = make_table([runtime(10, 5, corr=1), kernel(20, 10, corr=1, name="K")], tmp_path)
    payload = build_timeline(table, width=2000, critical_step="0")
    launch, k = _row(table, "cudaLaunchKernel"), _row(table, "K")
    assert _marked(payload) == {launch, k}
    edges = payload["critical"]["edges"]
    assert list(zip(edges["from_track"], edges["from_depth"], edges["to_track"],
                    edges["to_depth"])) == [(*_place(payload, launch), *_place(payload, k))]
    narrow = build_timeline(table, 0.0, 30.0, width=2, critical_step="0")
    assert [(t["kind"], r["blocks"]["path"], r["events"]["path"]) for t in narrow["tracks"]
            for r in t["rows"]] == [("cpu", [], [0]), ("gpu", [], [0])]


def test_a_one_node_path_and_an_empty_one(tmp_path):
    # a lone cudaMalloc, no step marker: one run in the window, one node on the path
    lone = make_table([runtime(10, 5, corr=1, name="cudaMalloc")], tmp_path)
    payload = build_timeline(lone, width=100, critical_step="0")
    assert _marked(payload) == {_row(lone, "cudaMalloc")}
    assert payload["critical"]["nodes"] == 1 and payload["critical"]["edges"]["total"] == 0
    # step 2 launches nothing: its path is empty and nothing is marked
    gap = make_table([step(1, 0, 100), step(2, 100, 100), step(3, 200, 100),
                      runtime(10, 5, corr=1), kernel(20, 10, corr=1),
                      runtime(210, 5, corr=2), kernel(220, 10, corr=2)], tmp_path)
    empty = build_timeline(gap, width=3000, critical_step="2")
    assert (_marked(empty), empty["critical"]["nodes"]) == (set(), 0)
    assert all(r["blocks"]["path"] == [] for t in empty["tracks"] for r in t["rows"])
