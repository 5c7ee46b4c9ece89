"""All ranks on one timeline (`analysis.distributed.timeline`): the clock-offset shift and the lane
merge, on a generated two-rank trace whose numbers are derived by hand below, and on the real
DDP and DLRM traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.distributed.summary import rank_summary
from tb_plugin.analysis.distributed.timeline import (
    MAX_LINKS,
    MAX_RANKS,
    RankChoiceError,
    build_rank_timeline,
    collective_links,
    comm_track,
    link_flows,
    shift_window,
)
from tb_plugin.load import load_trace
from tests.analysis.helpers import make_table
from tests.support import SHARED_TRACES, needs_shared

ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
GEMM = "void gemm_kernel<float>()"


def _op(name: str, ts: float, dur: float, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 23803, "tid": 1, "ts": ts,
            "dur": dur, "args": {"External id": ext, "Input Dims": [[1024]],
                                 "Input type": ["float"]}}


def _kernel(name: str, ts: float, dur: float, ext: int, stream: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "Kernel", "name": name, "pid": 0, "tid": f"stream {stream}",
            "ts": ts, "dur": dur, "args": {"device": 0, "stream": stream, "correlation": ext,
                                           "external id": ext}}


def _rank(tmp_path: Path, rank: int, clock: float, host: float, gemm: float, comm: tuple
          ) -> Any:
    """One rank: a GEMM on stream 7, an all_reduce whose kernel runs on stream 16; every time
    plus `clock` (the rank's clock minus the run's)."""
    events = [_op("aten::mm", clock + gemm - 5, 4, 1),
              _kernel(GEMM, clock + gemm, 50, 1, 7),
              _op("nccl:all_reduce", clock + host, 50, 2),
              _kernel(ALL_REDUCE, clock + comm[0], comm[1], 2, 16)]
    return make_table(events, tmp_path, distributedInfo={"backend": "nccl", "rank": rank,
                                                         "world_size": 2})


@pytest.fixture()
def two_ranks(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    # rank 0 on the run clock + 0: all_reduce kernel 100..200, GEMM 10..60, host from 5.
    # rank 1 on its clock 1000 later, arriving later: kernel 1150..1200, GEMM 1020..1070.
    tables = {"w0": _rank(tmp_path, 0, 0.0, 0, 10, (100, 100)),
              "w1": _rank(tmp_path, 1, 1000.0, 80, 20, (150, 50))}
    return {w: rank_summary(t) for w, t in tables.items()}, tables


def _track(payload: dict[str, Any], rank: int, stream: int) -> dict[str, Any]:
    return next(t for t in payload["tracks"]
                if t["rank"] == rank and t["thread"] == f"stream {stream}")


def _events(payload: dict[str, Any], track: dict[str, Any]) -> list[tuple[str, float, float]]:
    ev = track["rows"][0]["events"]
    return [(payload["names"][n], s, d) for n, s, d in zip(ev["name"], ev["start"], ev["dur"])]


def test_shift_window() -> None:
    assert shift_window(500.0, 700.0, -500.0) == (0.0, 200.0)
    assert shift_window(500.0, 700.0, 500.0) == (1000.0, 1200.0)


def test_offsets_from_collective_ends_and_merged_lanes(two_ranks) -> None:
    summaries, tables = two_ranks
    payload = build_rank_timeline(summaries, tables, width=200)
    # Collective ends: rank 0 at 200, rank 1 at 1200 (own clocks); rank 0 is the reference
    # (issue 28: the whole 1000 us goes to rank 1, not -500 / +500 split over both).
    assert [(lane["rank"], lane["offset_us"], lane["overridden"]) for lane in payload["lanes"]
            ] == [(0, 0.0, False), (1, 1000.0, False)]
    # Run-clock extent: rank 0 0..200 -> 0..200; rank 1 1015..1200 -> 15..200.
    assert (payload["start_us"], payload["end_us"]) == (0.0, 200.0)
    assert payload["origin_us"] == 0.0
    # GPU tracks only (in the single-file timeline's order), lane by lane, ids renumbered 0..3;
    # each lane is one process group.
    assert [(t["id"], t["lane"], t["thread"]) for t in payload["tracks"]] == [
        (0, 0, "stream 16"), (1, 0, "stream 7"), (2, 1, "stream 16"), (3, 1, "stream 7")]
    assert all(t["process"].startswith(f"rank {t['rank']} · ") for t in payload["tracks"])
    assert [lane["tracks"] for lane in payload["lanes"]] == [[0, 1], [2, 3]]
    # Times relative to 500 on the run clock; lane 1's names resolve through the shifted index.
    assert _events(payload, _track(payload, 0, 7)) == [(GEMM, 10, 50)]
    assert _events(payload, _track(payload, 0, 16)) == [(ALL_REDUCE, 100, 100)]
    assert _events(payload, _track(payload, 1, 7)) == [(GEMM, 20, 50)]
    assert _events(payload, _track(payload, 1, 16)) == [(ALL_REDUCE, 150, 50)]
    # The all_reduce as a link: rank 0 100..200, rank 1 150..200; one arrow end to end.
    links = payload["links"]
    assert (links["total"], links["name"]) == (1, ["nccl:all_reduce"])
    assert list(zip(links["item_lane"], links["item_start"], links["item_end"])) == [
        (0, 100.0, 200.0), (1, 150.0, 200.0)]
    flows = payload["flows"]
    assert (flows["cats"], flows["from_track"], flows["to_track"]) == (["collective"], [0], [2])
    assert (flows["from_ts"], flows["to_ts"]) == ([200.0], [200.0])


def test_offset_override_moves_a_lane(two_ranks) -> None:
    summaries, tables = two_ranks
    payload = build_rank_timeline(summaries, tables, start_us=0, end_us=400, width=400,
                                  offsets={1: 900.0})
    assert [(lane["offset_us"], lane["estimated_offset_us"], lane["overridden"])
            for lane in payload["lanes"]] == [(0.0, 0.0, False), (900.0, 1000.0, True)]
    # rank 1 drawn at t - 900: its all_reduce kernel 1150..1200 -> 250..300.
    assert _events(payload, _track(payload, 1, 16)) == [(ALL_REDUCE, 250, 50)]
    assert _events(payload, _track(payload, 0, 16)) == [(ALL_REDUCE, 100, 100)]
    assert list(zip(payload["links"]["item_start"], payload["links"]["item_end"])) == [
        (100.0, 200.0), (250.0, 300.0)]


def test_host_threads_and_rank_choice(two_ranks) -> None:
    summaries, tables = two_ranks
    payload = build_rank_timeline(summaries, tables, ranks=[1], host=True, width=100)
    assert sorted((t["rank"], t["kind"]) for t in payload["tracks"]) == [
        (1, "cpu"), (1, "gpu"), (1, "gpu")]
    assert payload["links"]["total"] == 0  # a collective needs two shown ranks
    both = build_rank_timeline(summaries, tables, host=True, width=100)
    tracks, flows = both["tracks"], both["flows"]
    assert [t["kind"] for t in tracks if t["lane"] == 0][0] == "cpu"  # host threads come first
    # the link lands on each lane's communication stream, not on its first track
    assert [(tracks[flows["from_track"][0]]["rank"], tracks[flows["from_track"][0]]["thread"]),
            (tracks[flows["to_track"][0]]["rank"], tracks[flows["to_track"][0]]["thread"])] == [
        (0, "stream 16"), (1, "stream 16")]
    with pytest.raises(RankChoiceError, match="no rank 5"):
        build_rank_timeline(summaries, tables, ranks=[5])
    with pytest.raises(RankChoiceError, match=f"at most {MAX_RANKS}"):
        build_rank_timeline(summaries, tables, ranks=list(range(MAX_RANKS + 1)))
    with pytest.raises(RankChoiceError, match="not shown"):
        build_rank_timeline(summaries, tables, ranks=[0], offsets={1: 3.0})


def _real(folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
    tables = {p.name.split(".")[0]: load_trace(str(p))
              for p in sorted((SHARED_TRACES / folder).glob("*.pt.trace.json*"))}
    return {w: rank_summary(t) for w, t in tables.items()}, tables


@needs_shared
@pytest.mark.parametrize("folder, ranks", [("ddp_2ranks_sampled", 2),
                                           ("param_dlrm_8ranks_nccl", 8)])
def test_real_runs_stack_every_rank_with_links(folder: str, ranks: int) -> None:
    summaries, tables = _real(folder)
    payload = build_rank_timeline(summaries, tables, width=1000)
    assert [lane["rank"] for lane in payload["lanes"]] == list(range(ranks))
    assert {t["lane"] for t in payload["tracks"]} == set(range(ranks))
    assert payload["links"]["total"] > 0
    assert payload["flows"]["total"] == payload["links"]["total"] * (ranks - 1)


def test_payload_keys_and_run_extent_with_an_overridden_reference(two_ranks) -> None:
    summaries, tables = two_ranks
    # Own clocks: rank 0 spans 0..200 (host all_reduce at 0, kernel ends at 200), rank 1
    # 1015..1200 (aten::mm at 1015). Rank 0 drawn at t - 50: -50..150; rank 1 at t - 1000:
    # 15..200. The run: -50..200, 250 us over 200 px.
    payload = build_rank_timeline(summaries, tables, width=200, offsets={0: 50.0})
    assert set(payload) == {"view", "start_us", "end_us", "width", "us_per_px", "origin_us",
                            "trace_start_us", "trace_end_us", "merge_px", "names", "tracks",
                            "steps", "flows", "counters", "stats", "lanes", "ranks",
                            "max_ranks", "host", "links"}
    assert {k: payload[k] for k in ("view", "start_us", "end_us", "width", "us_per_px",
                                    "origin_us", "trace_start_us", "trace_end_us", "counters",
                                    "ranks", "max_ranks", "host")} == {
        "view": "ranks", "start_us": -50.0, "end_us": 200.0, "width": 200, "us_per_px": 1.25,
        "origin_us": -50.0, "trace_start_us": -50.0, "trace_end_us": 200.0, "counters": [],
        "ranks": [0, 1], "max_ranks": MAX_RANKS, "host": False}
    assert payload["lanes"] == [
        {"worker": "w0", "rank": 0, "offset_us": 50.0, "estimated_offset_us": 0.0,
         "overridden": True, "tracks": [0, 1]},
        {"worker": "w1", "rank": 1, "offset_us": 1000.0, "estimated_offset_us": 1000.0,
         "overridden": False, "tracks": [2, 3]}]
    # the stats add up over the lanes: 4 events each
    assert payload["stats"]["events"] == 8
    # rank 1 only: its extent 15..200 alone
    one = build_rank_timeline(summaries, tables, ranks=[1], width=185)
    assert (one["trace_start_us"], one["trace_end_us"], one["us_per_px"]) == (15.0, 200.0, 1.0)


def test_bad_windows_and_ranks_are_named(two_ranks) -> None:
    summaries, tables = two_ranks
    with pytest.raises(ValueError, match=r"^bad window \[300\.0, 200\.0\]: need start_us < "
                                         r"end_us$"):
        build_rank_timeline(summaries, tables, start_us=300, end_us=200)
    with pytest.raises(ValueError, match=r"^bad window \[200\.0, 200\.0\]"):
        build_rank_timeline(summaries, tables, start_us=200, end_us=200)
    with pytest.raises(ValueError, match=r"^bad window \[nan, 200\.0\]"):
        build_rank_timeline(summaries, tables, start_us=float("nan"), end_us=200)
    assert build_rank_timeline(summaries, tables, start_us=199, end_us=200)["end_us"] == 200.0
    with pytest.raises(RankChoiceError, match=r"^no rank 5, 7 in this span; ranks: 0, 1$"):
        build_rank_timeline(summaries, tables, ranks=[7, 5, 0])
    with pytest.raises(RankChoiceError, match=rf"^at most {MAX_RANKS} ranks per request "
                                              rf"\({MAX_RANKS + 1} asked\)$"):
        build_rank_timeline(summaries, tables, ranks=list(range(MAX_RANKS + 1)))
    with pytest.raises(RankChoiceError, match=r"^offset given for rank 1, 3, which is not "
                                              r"shown$"):
        build_rank_timeline(summaries, tables, ranks=[0], offsets={3: 1.0, 1: 3.0})



def _links_keyed(rows: list[tuple]) -> pd.DataFrame:
    """(collective id, name, worker index, arrival, end on the worker's clock, matched)."""
    return pd.DataFrame(rows, columns=["id", "name", "w", "arrive_at", "end_at", "matched"])


def test_links_of_shown_ranks_in_the_window() -> None:
    # workers a, b, c; a and b shown (b's clock 10 us ahead). id 1: only a of the shown ranks;
    # id 2: unmatched. id 0 ends at 200 (run clock), id 3 starts at 700: a window [200, 700]
    # holds both, on its edges.
    keyed = _links_keyed([
        (0, "ar", 0, 100.0, 200.0, True), (0, "ar", 1, 150.0, 200.0, True),
        (1, "bc", 0, 300.0, 400.0, True), (1, "bc", 2, 300.0, 400.0, True),
        (2, "ag", 0, 500.0, 600.0, False), (2, "ag", 1, 550.0, 600.0, False),
        (3, "ar", 1, 790.0, 800.0, True), (3, "ar", 0, 700.0, 800.0, True)])
    links = collective_links(keyed, ["a", "b", "c"], ["a", "b"], {"a": 0.0, "b": 10.0},
                             200.0, 700.0)
    assert links == {"total": 2, "capped": False, "limit": MAX_LINKS, "id": [0, 3],
                     "name": ["ar", "ar"], "item_collective": [0, 0, 1, 1],
                     "item_lane": [0, 1, 0, 1],
                     # relative to 200: a 100..200, b 140..190; a 700..800, b 780..790
                     "item_start": [-100.0, -60.0, 500.0, 580.0],
                     "item_end": [0.0, -10.0, 600.0, 590.0]}
    # lanes follow the chosen order
    swapped = collective_links(keyed, ["a", "b", "c"], ["b", "a"], {"a": 0.0, "b": 10.0},
                               200.0, 700.0)
    assert swapped["item_lane"] == [0, 1, 0, 1] and swapped["item_start"] == [
        -60.0, -100.0, 580.0, 500.0]
    inside = collective_links(keyed, ["a", "b", "c"], ["a", "b"], {"a": 0.0, "b": 10.0},
                              200.5, 699.5)
    assert (inside["total"], inside["id"], inside["item_lane"]) == (0, [], [])
    empty = collective_links(keyed.iloc[:0], ["a"], ["a"], {"a": 0.0}, 0.0, 1.0)
    assert empty == {"total": 0, "capped": False, "limit": MAX_LINKS, "id": [], "name": [],
                     "item_collective": [], "item_lane": [], "item_start": [], "item_end": []}


def test_links_sampled_evenly_above_the_limit() -> None:
    count = MAX_LINKS + 1
    keyed = _links_keyed([(i, "ar", w, 10.0 * i, 10.0 * i + 5, True)
                          for i in range(count) for w in (0, 1)])
    links = collective_links(keyed, ["a", "b"], ["a", "b"], {"a": 0.0, "b": 0.0}, 0.0, 1e9)
    assert (links["total"], links["capped"]) == (count, True)
    assert links["id"] == [int(x) for x in np.linspace(0, count - 1, MAX_LINKS)]
    assert len(links["item_lane"]) == 2 * MAX_LINKS
    exact = collective_links(keyed[keyed["id"] < MAX_LINKS], ["a", "b"], ["a", "b"],
                             {"a": 0.0, "b": 0.0}, 0.0, 1e9)
    assert (exact["total"], exact["capped"], exact["id"]) == (
        MAX_LINKS, False, list(range(MAX_LINKS)))


def _links(collective: list[int], lane: list[int], end: list[float], capped: bool = False
           ) -> dict[str, Any]:
    return {"item_collective": collective, "item_lane": lane, "item_end": end, "capped": capped}


def test_link_flows_join_consecutive_lanes_on_their_anchor_tracks() -> None:
    links = _links([0, 0, 0, 1, 1, 2], [0, 1, 2, 0, 2, 1], [10.0, 11.0, 12.0, 20.0, 22.0, 30.0])
    flows = link_flows(links, [5, 6, 7])
    assert flows == {"total": 3, "capped": False, "limit": MAX_LINKS, "crossing": 0,
                     "cats": ["collective"], "cat": [0, 0, 0], "from_track": [5, 6, 5],
                     "from_depth": [0, 0, 0], "from_ts": [10.0, 11.0, 20.0],
                     "from_id": [-1, -1, -1], "to_track": [6, 7, 7], "to_depth": [0, 0, 0],
                     "to_ts": [11.0, 12.0, 22.0], "to_id": [-1, -1, -1]}
    # a lane without tracks (-1) breaks its arrows: only collective 1's remains
    missing = link_flows({**links, "capped": True}, [5, -1, 7])
    assert (missing["total"], missing["capped"], missing["from_track"], missing["to_track"],
            missing["from_ts"], missing["to_ts"]) == (1, True, [5], [7], [20.0], [22.0])
    empty = link_flows(_links([], [], []), [])
    assert (empty["total"], empty["from_track"], empty["to_ts"], empty["cat"]) == (0, [], [], [])


def test_comm_track_prefers_the_communication_stream(two_ranks) -> None:
    _, tables = two_ranks
    table = tables["w0"]
    tracks = [{"id": 3, "pid": "0", "tid": "stream 7"}, {"id": 4, "pid": "0", "tid": "stream 16"}]
    assert comm_track(table, tracks) == 4  # the all_reduce kernel runs on stream 16
    assert comm_track(table, tracks[:1]) == 3  # not shown: the first track
    assert comm_track(table, []) == -1
