"""Collective matching (`distributed/match.py`) at its rules, on hand-built call frames: the
group size (the call's own, else `pg_config`, else the world for the default group, else the
ranks present; never below the ranks present), matched/complete on both sides, the last
arriver on ties, median bytes, the id order, the matching mode per group, and the clock offsets
(the whole difference to the non-reference rank, medians, chains, separate sets, ignored
unmatched calls)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tb_plugin.analysis.distributed.match import clock_offsets, match, modes, with_waits
from tb_plugin.analysis.distributed.summary import DEFAULT_GROUP
from tests.analysis.helpers import CALL_COLUMNS


def _call(w: int, call: int, group: str, seq: int, d: float, *, nbytes: float = 100.0,
          size: float = math.nan, name: str = "nccl:all_reduce") -> tuple:
    return (w, call, group, name, "all_reduce", seq, d, nbytes, math.nan, size, "float", "1")


def _match(rows: list[tuple], sizes: dict[str, int], world) -> pd.DataFrame:
    return match(pd.DataFrame(rows, columns=CALL_COLUMNS), sizes, world)


def test_group_size_sources_and_flags() -> None:
    rows = [_call(0, 0, "0", 0, 5), _call(1, 0, "0", 0, 5),  # world 4: 2 of 4
            _call(0, 1, DEFAULT_GROUP, 0, 5),  # world 4: 1 of 4, unmatched
            _call(0, 2, "x", 0, 5), _call(1, 1, "x", 0, 5),  # pg_config: 3
            _call(0, 3, "y", 0, 5), _call(1, 2, "y", 0, 5),  # nothing known: the 2 present
            _call(0, 4, "z", 0, 5, size=2), _call(1, 3, "z", 0, 5, size=2),
            _call(2, 0, "z", 0, 5, size=2),  # its own size 2, but 3 present: 3
            _call(1, 4, "solo", 0, 5, size=1)]  # a group of one: matched alone
    out = _match(rows, {"x": 3, "z": 8}, 4)
    assert {g: (p, n, m, c) for g, p, n, m, c in zip(
        out["group"], out["present"], out["n"], out["matched"], out["complete"])} == {
        "0": (2, 4, True, False), DEFAULT_GROUP: (1, 4, False, False), "x": (2, 3, True, False),
        "y": (2, 2, True, True), "z": (3, 3, True, True), "solo": (1, 1, True, True)}
    assert sorted(out["id"]) == list(range(6))
    # without a world size the default groups fall back to the ranks present
    no_world = _match(rows, {}, None)
    assert dict(zip(no_world["group"], no_world["n"])) == {
        "0": 2, DEFAULT_GROUP: 1, "x": 2, "y": 2, "z": 3, "solo": 1}
    assert no_world["matched"].all()


def test_last_arriver_ties_skew_and_median_bytes() -> None:
    rows = [_call(0, 0, "g", 0, 4, nbytes=100), _call(1, 0, "g", 0, 9, nbytes=300),
            _call(2, 0, "g", 0, 4, nbytes=200),  # tie at 4: the lowest index, w0
            _call(0, 1, "g", 1, 8), _call(1, 1, "g", 1, 3), _call(2, 1, "g", 1, 6)]
    out = _match(rows, {}, None)
    assert list(zip(out["last"], out["transfer"], out["latency"], out["skew"], out["bytes"])) == [
        (0, 4.0, 9.0, 5.0, 200.0), (1, 3.0, 8.0, 5.0, 100.0)]
    keyed = with_waits(pd.DataFrame(rows, columns=CALL_COLUMNS), out)
    assert keyed["wait"].tolist() == [0.0, 5.0, 0.0, 5.0, 0.0, 3.0]


def test_ids_in_the_first_rank_call_order() -> None:
    # rank 1 alone calls "b" first; rank 0 calls "a" then "b": ids a, b, then rank 1's own "c"
    rows = [_call(1, 0, "g", 0, 1, name="nccl:c"), _call(0, 0, "g", 0, 1, name="nccl:a"),
            _call(0, 1, "g", 0, 1, name="nccl:b"), _call(1, 1, "g", 0, 1, name="nccl:b")]
    out = _match(rows, {}, None)
    assert list(zip(out["id"], out["name"])) == [(0, "nccl:a"), (1, "nccl:b"), (2, "nccl:c")]


def test_ids_follow_the_first_rank_even_where_another_rank_called_earlier() -> None:
    # rank 0: a (group g), c (group h), b (group k); rank 1 calls only b, as its first call.
    # In rank 0's order: a, c, b (b's call index 0 on rank 1 does not move it before c).
    rows = [_call(1, 0, "k", 0, 1, name="nccl:b"), _call(0, 0, "g", 0, 1, name="nccl:a"),
            _call(0, 1, "h", 0, 1, name="nccl:c"), _call(0, 2, "k", 0, 1, name="nccl:b")]
    out = _match(rows, {}, None)
    assert list(zip(out["id"], out["name"])) == [(0, "nccl:a"), (1, "nccl:c"), (2, "nccl:b")]


def test_step_is_the_lowest_index_ranks_whatever_the_row_order() -> None:
    rows = [(1, 0, "g", "nccl:x", "all_reduce", 0, 2.0, 1.0, math.nan, math.nan, "f", "7"),
            (0, 0, "g", "nccl:x", "all_reduce", 0, 2.0, 1.0, math.nan, math.nan, "f", "6")]
    out = _match(rows, {}, None)
    assert out["step"].tolist() == ["6"]
    assert out["last"].tolist() == [0]  # equal durations: the lowest index, not the first row


def test_modes_per_group() -> None:
    frame = pd.DataFrame({"group": ["b", "a", "a", "b"], "by_seq": [True, True, False, True]})
    assert modes(frame) == {"a": "order", "b": "sequence"}
    assert modes(frame.iloc[:0]) == {}


def _keyed(rows: list[tuple]) -> pd.DataFrame:
    """(collective id, worker, end on the worker's clock, matched)."""
    return pd.DataFrame(rows, columns=["id", "w", "end_at", "matched"])


def test_offsets_go_wholly_to_the_non_reference_rank() -> None:
    # w1 runs 1000 us ahead of w0; w2 shares only with w1: its end 600 is 2100 - 1000 = 1100
    # on the run clock, so w2 is 500 behind
    keyed = _keyed([(0, 0, 100.0, True), (0, 1, 1100.0, True),
                    (1, 1, 2100.0, True), (1, 2, 600.0, True)])
    np.testing.assert_array_equal(clock_offsets(keyed, 3), [0.0, 1000.0, -500.0])


def test_offsets_are_medians_and_ignore_unshared_calls() -> None:
    # w1 - w0 over three collectives: 10, 20, 90 -> 20; a collective only w1 saw (id 3) and an
    # unmatched one (id 4) say nothing
    keyed = _keyed([(0, 0, 100.0, True), (0, 1, 110.0, True), (1, 0, 200.0, True),
                    (1, 1, 220.0, True), (2, 0, 300.0, True), (2, 1, 390.0, True),
                    (3, 1, 5000.0, True), (4, 0, 0.0, False), (4, 1, 9000.0, False)])
    np.testing.assert_array_equal(clock_offsets(keyed, 2), [0.0, 20.0])


def test_separate_sets_have_their_own_reference() -> None:
    # {w0, w1} and {w2, w3} share nothing: w2 is the second set's reference; w4 shares nothing
    keyed = _keyed([(0, 0, 10.0, True), (0, 1, 15.0, True),
                    (1, 3, 50.0, True), (1, 2, 80.0, True)])
    np.testing.assert_array_equal(clock_offsets(keyed, 5), [0.0, 5.0, 0.0, -30.0, 0.0])
    assert clock_offsets(keyed.iloc[:0], 2).tolist() == [0.0, 0.0]
