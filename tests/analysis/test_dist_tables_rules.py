"""The Distributed view's cross-rank tables (`distributed/tables.py`) at their rules: the heat
maps (only collectives seen on more than one rank, steps in numeric order, maximum per
collective bucket, sum per step, rank and column buckets above the limits), the collective rows
(every key, the bandwidth per nccl-tests, the `MAX_COLLECTIVE_ROWS` largest skews in id order),
and the straggler recommendations (the half-of-all-waiting and the group-material thresholds on
both sides, the missing-ranks caveat). Inputs are hand-built call frames run through the real
`match` / `with_waits`; every expected value is derived by hand in the comments."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tb_plugin.analysis.distributed.tables import (
    HEAT_MAX_COLUMNS,
    HEAT_MAX_RANKS,
    MAX_COLLECTIVE_ROWS,
    bus_factor,
    collective_rows,
    heat_maps,
    recommendations,
    straggler_rows,
)
from tests.analysis.helpers import collective_call as _call
from tests.analysis.helpers import collective_frames as _frames

AR, BC, AG, RED = "nccl:all_reduce", "nccl:broadcast", "nccl:all_gather", "nccl:reduce"


# --- heat maps --------------------------------------------------------------------------------

def test_heat_maps_keep_cross_rank_collectives_and_order_steps_numerically() -> None:
    # Rank a's call order gives the ids: all_reduce #0, broadcast #0 (rank a only: present 1,
    # no column), all_reduce #1, all_reduce #2, reduce #0 (no step).
    rows = [_call(0, 0, AR, 0, 10, "2"), _call(1, 0, AR, 0, 4, "2"), _call(2, 0, AR, 0, 7, "2"),
            _call(0, 1, BC, 0, 9, "2", size=3),
            _call(0, 2, AR, 1, 5, "10"), _call(1, 1, AR, 1, 8, "10"),
            _call(0, 3, AR, 2, 1, "2"), _call(1, 2, AR, 2, 3, "2"), _call(2, 1, AR, 2, 1, "2"),
            _call(0, 4, RED, 0, 2, ""), _call(1, 3, RED, 0, 2, "")]
    matched, keyed = _frames(rows)
    heat = heat_maps(["a", "b", "c"], keyed, matched)
    assert (heat["rows"], heat["rank_bucket"], heat["downsampled"], heat["note"]) == (
        ["a", "b", "c"], 1, False, "")
    # waits (d - min d): all_reduce #0: 6, 0, 3; #1: 0, 3, - ; #2: 0, 2, 0; reduce: 0, 0, -
    assert heat["collectives"] == {
        "columns": [f"{AR} #0", f"{AR} #1", f"{AR} #2", f"{RED} #0"],
        "column_steps": ["2", "10", "2", ""], "column_bucket": 1,
        "values": [[6.0, 0.0, 0.0, 0.0], [0.0, 3.0, 2.0, 0.0], [3.0, None, 0.0, None]]}
    # per step, summed: step 2 = #0 + #2: a 6, b 2, c 3; step 10: a 0, b 3, c none.
    # "10" after "2": numeric order, not text order; the reduce's empty step has no column.
    assert heat["steps"] == {"columns": ["2", "10"],
                             "values": [[6.0, 0.0], [2.0, 3.0], [3.0, None]]}


def test_heat_maps_of_a_collective_on_one_rank_only_are_empty() -> None:
    matched, keyed = _frames([_call(0, 0, AR, 0, 5, size=2), _call(0, 1, AR, 1, 6, size=2)])
    heat = heat_maps(["a", "b"], keyed, matched)
    assert heat["collectives"] == {"columns": [], "column_steps": [], "column_bucket": 1,
                                   "values": [[], []]}
    assert heat["steps"] == {"columns": [], "values": [[], []]}


def test_heat_map_columns_bucket_with_the_maximum_above_the_limit() -> None:
    count = 2 * HEAT_MAX_COLUMNS + 1  # 401 collectives -> 3 per column, 134 columns
    rows = []
    for i in range(count):  # rank a waits i us at collective i, rank b never
        rows += [_call(0, i, AR, i, 1.0 + i, str(i // 100)), _call(1, i, AR, i, 1.0, str(i // 100))]
    matched, keyed = _frames(rows)
    heat = heat_maps(["a", "b"], keyed, matched)
    by_col = heat["collectives"]
    bucket = math.ceil(count / HEAT_MAX_COLUMNS)
    assert bucket == 3 and by_col["column_bucket"] == 3
    starts = range(0, count, bucket)
    assert by_col["columns"] == [f"{AR} #{i} .. {AR} #{min(count, i + bucket) - 1}"
                                 for i in starts]
    assert by_col["columns"][0] == f"{AR} #0 .. {AR} #2"
    assert by_col["columns"][-1] == f"{AR} #399 .. {AR} #400"
    assert by_col["column_steps"] == [str(i // 100) for i in starts]
    assert by_col["values"] == [[float(min(count, i + bucket) - 1) for i in starts],
                                [0.0] * len(starts)]
    assert heat["downsampled"] and heat["note"] == (
        "Downsampled: 1 rank(s) per row, 3 collective(s) per column, the largest wait shown.")
    # steps are never bucketed: the sum of i over each hundred
    assert heat["steps"] == {"columns": ["0", "1", "2", "3", "4"],
                             "values": [[float(sum(range(s * 100, min(count, s * 100 + 100))))
                                         for s in range(5)], [0.0] * 5]}


def test_heat_map_rows_bucket_ranks_above_the_limit() -> None:
    n = HEAT_MAX_RANKS + 1  # 129 ranks -> 2 per row, 65 rows
    workers = [f"w{i}" for i in range(n)]
    matched, keyed = _frames([_call(w, 0, AR, 0, 1.0 + w) for w in range(n)])  # waits w us
    heat = heat_maps(workers, keyed, matched)
    assert heat["rank_bucket"] == 2 and len(heat["rows"]) == 65
    assert heat["rows"][:2] == ["w0 .. w1", "w2 .. w3"] and heat["rows"][-1] == "w128 .. w128"
    # collective cell: the larger wait of the pair; step cell: their sum
    assert heat["collectives"]["values"] == [[float(min(n - 1, i + 1))] for i in range(0, n, 2)]
    assert heat["steps"]["values"] == [[float(i + min(n - 1, i + 1)) if i + 1 < n else float(i)]
                                       for i in range(0, n, 2)]
    assert heat["note"] == ("Downsampled: 2 rank(s) per row, 1 collective(s) per column, the "
                            "largest wait shown.")


# --- collective rows ----------------------------------------------------------------------------

def test_collective_rows_every_key() -> None:
    rows = [_call(0, 0, AR, 0, 10, nbytes=4000, size=4), _call(1, 0, AR, 0, 4, nbytes=4000, size=4),
            _call(0, 1, AG, 0, 7, "", nbytes=50, size=2, dtype=""),
            _call(0, 2, BC, 0, 3, nbytes=3000), _call(1, 1, BC, 0, 3, nbytes=3000),
            _call(0, 3, AG, 1, 4, nbytes=10, out=8000), _call(1, 2, AG, 1, 4, nbytes=10, out=8000)]
    matched, _ = _frames(rows)
    out = collective_rows(["a", "b"], matched)
    assert (out["total"], out["shown"], out["truncated"]) == (4, 4, False)
    assert out["rows"] == [
        # 2 of 4 ranks; transfer 4, skew 6, last b; algbw 4000 B / 4 us = 1 GB/s, x 2*3/4
        {"id": 0, "group": "g", "name": AR, "collective": "all_reduce", "seq": 0, "step": "1",
         "ranks": 2, "group_size": 4, "complete": False, "bytes": 4000, "dtype": "float",
         "last_arriver": "b", "skew_us": 6.0, "transfer_us": 4.0, "latency_us": 10.0,
         "algbw_gbps": 1.0, "busbw_gbps": 1.5},
        # one rank of two: unmatched, no skew, no transfer, no bandwidth; S = 2 x 50 bytes
        {"id": 1, "group": "g", "name": AG, "collective": "all_gather", "seq": 0, "step": None,
         "ranks": 1, "group_size": 2, "complete": False, "bytes": 100, "dtype": None,
         "last_arriver": None, "skew_us": None, "transfer_us": None, "latency_us": 7.0,
         "algbw_gbps": None, "busbw_gbps": None},
        # no skew: no last arriver; broadcast's bus factor 1
        {"id": 2, "group": "g", "name": BC, "collective": "broadcast", "seq": 0, "step": "1",
         "ranks": 2, "group_size": 2, "complete": True, "bytes": 3000, "dtype": "float",
         "last_arriver": None, "skew_us": 0.0, "transfer_us": 3.0, "latency_us": 3.0,
         "algbw_gbps": 1.0, "busbw_gbps": 1.0},
        # all_gather with an output size: S = 8000 bytes (not 2 x 10); busbw x (2-1)/2
        {"id": 3, "group": "g", "name": AG, "collective": "all_gather", "seq": 1, "step": "1",
         "ranks": 2, "group_size": 2, "complete": True, "bytes": 8000, "dtype": "float",
         "last_arriver": None, "skew_us": 0.0, "transfer_us": 4.0, "latency_us": 4.0,
         "algbw_gbps": 2.0, "busbw_gbps": 1.0}]


def test_collective_rows_keep_the_largest_skews_in_id_order() -> None:
    count = MAX_COLLECTIVE_ROWS + 2
    # collective i: skew (i * 7) % count, all distinct; the two smallest (0 and 1) are dropped
    skews = [(i * 7) % count for i in range(count)]
    rows = []
    for i, skew in enumerate(skews):
        rows += [_call(0, i, AR, i, 1.0 + skew), _call(1, i, AR, i, 1.0)]
    matched, _ = _frames(rows)
    out = collective_rows(["a", "b"], matched)
    assert (out["total"], out["shown"], out["truncated"]) == (count, MAX_COLLECTIVE_ROWS, True)
    kept = [i for i, s in enumerate(skews) if s >= 2]
    assert [r["id"] for r in out["rows"]] == kept
    assert [r["skew_us"] for r in out["rows"]] == [float(skews[i]) for i in kept]


def test_bus_factor_per_kind_and_a_group_of_one() -> None:
    assert [bus_factor(k, 4) for k in ("all_reduce", "all_gather", "reduce_scatter",
                                       "all_to_all", "broadcast", "reduce", "send", "recv")] == [
        1.5, 0.75, 0.75, 0.75, 1.0, 1.0, 1.0, 1.0]
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_reduce", 1) is None
    assert bus_factor("barrier", 4) is None


# --- recommendations ---------------------------------------------------------------------------

DEVICES = [{"worker": "a", "rank": 0, "node": "h0", "pid": 10},
           {"worker": "b", "rank": None, "node": "h1", "pid": 11}]
ADVICE = ("Look at what it does before these collectives: uneven data or work per rank, data "
          "loading, host-side stalls, or a slower GPU or link.")
FSDP_ADVICE = ("With FSDP, a late rank stalls every layer's all-gather prefetch and "
               "reduce-scatter: compare its forward/backward compute and CPU overhead per "
               "layer, and check its data and sharding balance.")
CAVEAT_TAIL = (" 2 rank(s) are missing from the run (2, 3) and may have arrived later still: "
               "then they are the cause, and the transfer times (and bandwidths) include the "
               "wait for them.")


def _stragglers(share: float, total: float = 100_000.0) -> dict[str, Any]:
    return {"total": 2, "skewed_collectives": 5, "total_wait_us": total, "rows": [
        {"worker": "b", "collectives": 5, "last": 3,
         "last_by_collective": {"broadcast": 1, "all_reduce": 2},
         "imposed_wait_us": share * total, "imposed_share": share, "waited_us": 0.0}]}


def test_recommendation_names_the_straggler_from_half_of_all_waiting() -> None:
    empty = pd.DataFrame()
    out = recommendations(_stragglers(0.5), empty, DEVICES, False)
    assert out == ["Straggler: b (rank unknown, host h1, pid 11) arrived last at 3 of 5 "
                   "collectives with a skew (all_reduce x2, broadcast x1); the other ranks "
                   "waited 50.00 ms for it, 50% of all waiting. " + ADVICE]
    assert recommendations(_stragglers(0.5), empty, DEVICES, True)[0].endswith(
        "50% of all waiting. " + FSDP_ADVICE)
    cover = {"missing": 2, "missing_ranks": [2, 3]}
    assert recommendations(_stragglers(0.5), empty, DEVICES, False, cover=cover)[0].endswith(
        "50% of all waiting. Of the ranks present it arrived last;" + CAVEAT_TAIL + " " + ADVICE)
    # just under half: spread, and the caveat loses its "arrived last" clause
    spread = ("Waiting is spread over the ranks (100.00 ms in all); no single rank imposes half "
              "of it (the most: b (rank unknown, host h1, pid 11), 49%).")
    assert recommendations(_stragglers(0.49), empty, DEVICES, False) == [spread]
    assert recommendations(_stragglers(0.49), empty, DEVICES, False, cover=cover) == [
        spread + CAVEAT_TAIL]
    cover_unlisted = {"missing": 2, "missing_ranks": []}
    assert recommendations(_stragglers(0.5), empty, [], False, cover=cover_unlisted)[0] == (
        "Straggler: b (rank unknown, host None, pid None) arrived last at 3 of 5 collectives "
        "with a skew (all_reduce x2, broadcast x1); the other ranks waited 50.00 ms for it, 50% "
        "of all waiting. Of the ranks present it arrived last; 2 rank(s) are missing from the "
        "run and may have arrived later still: then they are the cause, and the transfer times "
        "(and bandwidths) include the wait for them. " + ADVICE)


def test_no_recommendation_without_waiting() -> None:
    empty = pd.DataFrame()
    # any waiting at all is reported, however little
    assert recommendations(_stragglers(0.5, total=0.8), empty, DEVICES, False)[0].startswith(
        "Straggler: b (rank unknown, host h1, pid 11) arrived last at 3 of 5 collectives with a "
        "skew (all_reduce x2, broadcast x1); the other ranks waited 0.00 ms")
    assert recommendations(_stragglers(0.0, total=0.0), empty, DEVICES, False) == []
    assert recommendations({"rows": [], "total_wait_us": 5.0}, empty, DEVICES, False) == []


def test_group_straggler_recommended_from_a_tenth_of_all_waiting() -> None:
    def group(name: str, straggler: Any, wait: float) -> dict[str, Any]:
        return {"group": name, "size": 2, "straggler": straggler, "straggler_share": 0.75,
                "total_wait_us": wait}
    groups = {"rows": [group("tp0", "a", 10_000.0),  # exactly a tenth of 100 ms: named
                       group("tp1", "a", 9_999.0),  # under a tenth: not
                       group("tp2", "b", 50_000.0),  # the run's own straggler: not again
                       group("tp3", None, 50_000.0)]}  # no straggler: not
    out = recommendations(_stragglers(0.5), pd.DataFrame(), DEVICES, False, groups=groups)
    assert out[1:] == ["Process group tp0 (2 ranks): its straggler is a (rank 0, host h0, "
                       "pid 10), 75% of the group's 10.00 ms of waiting."]


def test_straggler_rows_from_matched_collectives() -> None:
    # all_reduce #0: d 10 / 4 -> b last, a waits 6; #1: 2 / 5 -> a last, b waits 3;
    # broadcast: 3 / 3 -> no skew, not counted; all_gather on a only -> not shared;
    # reduce: 2.5 / 2 -> b last by half a microsecond, a waits 0.5.
    rows = [_call(0, 0, AR, 0, 10), _call(1, 0, AR, 0, 4), _call(0, 1, AR, 1, 2),
            _call(1, 1, AR, 1, 5), _call(0, 2, BC, 0, 3), _call(1, 2, BC, 0, 3),
            _call(0, 3, AG, 0, 9, size=2), _call(0, 4, RED, 0, 2.5), _call(1, 3, RED, 0, 2)]
    matched, keyed = _frames(rows)
    out = straggler_rows(["a", "b", "c"], keyed, matched)
    assert (out["total"], out["skewed_collectives"], out["total_wait_us"]) == (3, 3, 9.5)
    assert out["rows"] == [
        {"worker": "b", "collectives": 3, "last": 2,
         "last_by_collective": {"all_reduce": 1, "reduce": 1}, "imposed_wait_us": 6.5,
         "imposed_share": round(6.5 / 9.5, 3), "waited_us": 3.0},
        {"worker": "a", "collectives": 3, "last": 1, "last_by_collective": {"all_reduce": 1},
         "imposed_wait_us": 3.0, "imposed_share": round(3 / 9.5, 3), "waited_us": 6.5},
        {"worker": "c", "collectives": 0, "last": 0, "last_by_collective": {},
         "imposed_wait_us": 0.0, "imposed_share": 0.0, "waited_us": 0.0}]
    assert np.isclose(sum(r["imposed_wait_us"] for r in out["rows"]), out["total_wait_us"])


def test_a_sub_microsecond_skew_names_the_last_arriver() -> None:
    matched, _ = _frames([_call(0, 0, AR, 0, 2.5), _call(1, 0, AR, 0, 2)])
    [row] = collective_rows(["a", "b"], matched)["rows"]
    assert (row["last_arriver"], row["skew_us"], row["transfer_us"]) == ("b", 0.5, 2.0)


def test_straggler_shares_without_and_with_little_waiting() -> None:
    # no skew anywhere: nobody imposes anything, every share 0
    matched, keyed = _frames([_call(0, 0, AR, 0, 2), _call(1, 0, AR, 0, 2)])
    out = straggler_rows(["a", "b"], keyed, matched)
    assert (out["skewed_collectives"], out["total_wait_us"]) == (0, 0.0)
    assert [(r["worker"], r["collectives"], r["imposed_share"]) for r in out["rows"]] == [
        ("a", 0, 0.0), ("b", 0, 0.0)]
    # half a microsecond of waiting in all: b imposes all of it
    matched, keyed = _frames([_call(0, 0, AR, 0, 2.5), _call(1, 0, AR, 0, 2)])
    out = straggler_rows(["a", "b"], keyed, matched)
    assert [(r["worker"], r["imposed_share"]) for r in out["rows"]] == [("b", 1.0), ("a", 0.0)]


def test_heat_map_values_keep_three_decimals() -> None:
    matched, keyed = _frames([_call(0, 0, AR, 0, 1.0 + 1 / 7), _call(1, 0, AR, 0, 1.0)])
    heat = heat_maps(["a", "b"], keyed, matched)
    assert heat["collectives"]["values"] == [[0.143], [0.0]]
    assert heat["steps"]["values"] == [[0.143], [0.0]]


def test_heat_map_buckets_take_the_maximum_whatever_the_order() -> None:
    # 401 collectives (3 per column) with waits (7 i) mod 11 on rank a: not monotone inside a
    # bucket; steps by hundreds, the last collective in a step named "warmup" (after the numbers)
    count, bucket = 2 * HEAT_MAX_COLUMNS + 1, 3
    wait = [(7 * i) % 11 for i in range(count)]
    step = [str(i // 100) if i < count - 1 else "warmup" for i in range(count)]
    rows = [c for i in range(count)
            for c in (_call(0, i, AR, i, 1.0 + wait[i], step[i]), _call(1, i, AR, i, 1.0, step[i]))]
    matched, keyed = _frames(rows)
    heat = heat_maps(["a", "b"], keyed, matched)
    starts = range(0, count, bucket)
    assert heat["collectives"]["values"][0] == [float(max(wait[i:i + bucket])) for i in starts]
    names = ["0", "1", "2", "3", "warmup"]
    assert heat["steps"] == {"columns": names, "values": [
        [float(sum(w for w, s in zip(wait, step) if s == name)) for name in names],
        [0.0] * len(names)]}


def test_heat_map_rank_buckets_take_the_maximum_and_sum_whatever_the_order() -> None:
    n = HEAT_MAX_RANKS + 1  # 2 ranks per row; waits (5 w) mod 13: not monotone in a pair
    wait = [(5 * w) % 13 for w in range(n)]
    matched, keyed = _frames([_call(w, 0, AR, 0, 1.0 + wait[w]) for w in range(n)])
    assert min(wait) == 0  # the transfer is 1 us: each rank's wait is wait[w]
    heat = heat_maps([f"w{i}" for i in range(n)], keyed, matched)
    assert heat["collectives"]["values"] == [[float(max(wait[i:i + 2]))] for i in range(0, n, 2)]
    assert heat["steps"]["values"] == [[float(sum(wait[i:i + 2]))] for i in range(0, n, 2)]


def test_two_collectives_per_column_is_downsampled() -> None:
    count = HEAT_MAX_COLUMNS + 1  # 201 -> 2 per column
    rows = [c for i in range(count) for c in (_call(0, i, AR, i, 2.0), _call(1, i, AR, i, 1.0))]
    matched, keyed = _frames(rows)
    heat = heat_maps(["a", "b"], keyed, matched)
    assert (heat["collectives"]["column_bucket"], heat["downsampled"]) == (2, True)
    assert heat["note"] == ("Downsampled: 1 rank(s) per row, 2 collective(s) per column, the "
                            "largest wait shown.")
    exact = heat_maps(["a", "b"], *_frames(rows[:2 * HEAT_MAX_COLUMNS])[::-1])
    assert (exact["collectives"]["column_bucket"], exact["downsampled"], exact["note"]) == (
        1, False, "")
