"""The Distributed view's coverage, bus bandwidth and process-group tables
(`distributed/tables.py`, `distributed/groups.py`) at their rules: missing ranks named (at
most MISSING_SHOWN), the all-gather size, bandwidth only with a positive transfer and size,
per kind and group size with the link peak, and the process-group rows (straggler share
threshold, transfer-weighted busbw, locality, link and peak). Inputs are hand-built call frames
run through the real `match` / `with_waits`, and real summaries of the generated FSDP-like
trace; every expected value is derived by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.distributed.groups import NETWORK_LINK, NETWORK_PEAK_GBPS, group_rows
from tb_plugin.analysis.distributed.summary import rank_summary
from tb_plugin.analysis.distributed.tables import (
    MISSING_SHOWN,
    bandwidth_rows,
    collective_table,
    coverage,
    gpu_names,
)
from tests.analysis.helpers import collective_call as _call
from tests.analysis.helpers import collective_frames as _frames
from tests.analysis.helpers import make_table
from tests.support.fsdp_trace import FIRST_GATHER_END, distributed_info, fsdp_events

AR, BC, AG, RED = "nccl:all_reduce", "nccl:broadcast", "nccl:all_gather", "nccl:reduce"


# --- coverage ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    """Real summaries of the generated FSDP-like trace: ranks 0 and 2, and one without a rank."""
    folder = tmp_path_factory.mktemp("cover")
    def one(info):
        return rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), folder,
                                       **({"distributedInfo": info} if info else {})))
    return {"r0": one(distributed_info(0)), "r2": one({**distributed_info(0), "rank": 2}),
            "x": one(None)}


MISSING_TEXT = ("waits, last arrivers, stragglers and bandwidth cover the present ranks only, "
                "and a collective seen on one rank is not split into transfer and wait "
                "(\"unmatched\").")


def test_coverage_names_the_missing_ranks(summaries) -> None:
    ranked = {w: summaries[w] for w in ("r0", "r2")}
    assert coverage(ranked, 4) == {
        "world_size": 4, "ranks_present": 2, "ranks": [0, 2], "missing": 2,
        "missing_ranks": [1, 3], "complete": False,
        "message": "Only 2 of 4 ranks are in this run (2 missing): " + MISSING_TEXT}
    assert coverage(ranked, 3) == {
        "world_size": 3, "ranks_present": 2, "ranks": [0, 2], "missing": 1,
        "missing_ranks": [1], "complete": False,
        "message": "Only 2 of 3 ranks are in this run (1 missing): " + MISSING_TEXT}
    # more ranks present than the world says: nothing missing
    assert coverage(ranked, 2)["missing"] == 0 and coverage(ranked, 1)["complete"]
    assert coverage(ranked, None) == {"world_size": None, "ranks_present": 2, "ranks": [0, 2],
                                      "missing": 0, "missing_ranks": [], "complete": True,
                                      "message": ""}


def test_coverage_without_ranks_counts_the_workers(summaries) -> None:
    # no rank known: the workers are the ranks present; which ones are missing is unknown
    unranked = {"x": summaries["x"]}
    assert coverage(unranked, 3) == {
        "world_size": 3, "ranks_present": 1, "ranks": [], "missing": 2, "missing_ranks": [],
        "complete": False,
        "message": "Only 1 of 3 ranks are in this run (2 missing): " + MISSING_TEXT}
    assert coverage(unranked, 1)["message"] == "" and coverage(unranked, 0)["missing"] == 0
    # one rank known among three workers: the known ranks count
    mixed = coverage(summaries, 4)
    assert (mixed["ranks_present"], mixed["ranks"], mixed["missing_ranks"]) == (2, [0, 2], [1, 3])


def test_missing_ranks_shown_at_most_32(summaries) -> None:
    ranked = {w: summaries[w] for w in ("r0", "r2")}
    out = coverage(ranked, 100)
    assert out["missing"] == 98
    assert out["missing_ranks"] == ([1] + list(range(3, 100)))[:MISSING_SHOWN]
    assert MISSING_SHOWN == 32 and out["missing_ranks"][-1] == 33


# --- bandwidth ---------------------------------------------------------------------------------

H100 = "NVIDIA H100 80GB HBM3"


def test_bandwidth_rows_per_kind_and_size_with_the_link_peak() -> None:
    # all_reduce over 2 ranks: 4000 B in 4 us and 8000 B in 2 us -> 12000 B / 6 us = 2 GB/s,
    # x 2(2-1)/2 = 2; a kind without a bus factor ("custom"): algbw 1, no busbw; the all_gather
    # seen on one rank has no bandwidth and no row
    rows = [_call(0, 0, AR, 0, 6, nbytes=4000), _call(1, 0, AR, 0, 4, nbytes=4000),
            _call(0, 1, AR, 1, 2, nbytes=8000), _call(1, 1, AR, 1, 2, nbytes=8000),
            _call(0, 2, "nccl:custom", 0, 4, nbytes=4000),
            _call(1, 2, "nccl:custom", 0, 4, nbytes=4000),
            _call(0, 3, AG, 0, 4, size=2)]
    matched, _ = _frames(rows)
    devices = [{"worker": "a", "gpus": [{"name": H100}]}, {"worker": "b", "gpus": [{"name": H100}]}]
    assert bandwidth_rows(matched, devices) == [
        {"collective": "all_reduce", "group_size": 2, "calls": 2, "bytes": 12000,
         "transfer_us": 6.0, "algbw_gbps": 2.0, "bus_factor": 1.0, "busbw_gbps": 2.0,
         "peak_gbps": 450.0},
        {"collective": "custom", "group_size": 2, "calls": 1, "bytes": 4000, "transfer_us": 4.0,
         "algbw_gbps": 1.0, "bus_factor": None, "busbw_gbps": None, "peak_gbps": 450.0}]
    assert [r["peak_gbps"] for r in bandwidth_rows(matched, [])] == [None, None]
    unnamed = [{"worker": "a", "gpus": [{"name": None}]}]
    assert [r["peak_gbps"] for r in bandwidth_rows(matched, unnamed)] == [None, None]
    assert bandwidth_rows(matched.iloc[:0], devices) == []


def test_gpu_names() -> None:
    assert gpu_names([{"gpus": [{"name": H100}, {"name": None}]}, {"gpus": None}, {}]) == {
        H100, ""}


# --- process groups ----------------------------------------------------------------------------

def _group_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [
        # group s (3 ranks): the last arrivers w0, w1, w2 impose 3, 3 and 4 us: w2 has 40 %
        _call(0, 0, AR, 0, 1, group="s"), _call(1, 0, AR, 0, 2.5, group="s"),
        _call(2, 0, AR, 0, 2.5, group="s"),
        _call(0, 1, AR, 1, 2.5, group="s"), _call(1, 1, AR, 1, 1, group="s"),
        _call(2, 1, AR, 1, 2.5, group="s"),
        _call(0, 2, AR, 2, 3, group="s"), _call(1, 2, AR, 2, 3, group="s"),
        _call(2, 2, AR, 2, 1, group="s"),
        # group g (3 ranks): w1 last (4 us), the others wait 6 and 3: w1 has it all
        _call(0, 3, AR, 0, 10, nbytes=4000), _call(1, 3, AR, 0, 4, nbytes=4000),
        _call(2, 3, AR, 0, 7, nbytes=4000),
        # group h (w0 and w2): no skew, no waiting; 2000 B in 5 us, bus factor 1
        _call(0, 4, BC, 0, 5, nbytes=2000, group="h"), _call(2, 4, BC, 0, 5, nbytes=2000,
                                                            group="h"),
        # group k: w1 alone, a group of one: no bandwidth
        _call(1, 5, AR, 0, 3, size=1, group="k")]
    matched, keyed = _frames(rows)
    return keyed, collective_table(matched)


def test_group_rows_every_key() -> None:
    keyed, table = _group_frames()
    out = group_rows(["w0", "w1", "w2"], ["n0", "n0", "n1"], True, keyed, table, {H100})
    common = {"link": NETWORK_LINK, "peak_gbps": NETWORK_PEAK_GBPS, "locality": "inter-node",
              "nodes": 2}
    assert out == {"total": 4, "rows": [  # most waiting first, then by name
        # 3 x 100 B, 1 us each: algbw 0.1 GB/s, x 2(3-1)/3
        {"group": "s", "size": 3, "ranks_present": 3, "workers": ["w0", "w1", "w2"], **common,
         "collectives": 3, "bytes": 300, "transfer_us": 3.0, "busbw_gbps": round(0.4 / 3, 3),
         "total_wait_us": 10.0, "straggler": None, "straggler_share": 0.4},
        # 4000 B in 4 us: algbw 1, x 4/3
        {"group": "g", "size": 3, "ranks_present": 3, "workers": ["w0", "w1", "w2"], **common,
         "collectives": 1, "bytes": 4000, "transfer_us": 4.0, "busbw_gbps": round(4 / 3, 3),
         "total_wait_us": 9.0, "straggler": "w1", "straggler_share": 1.0},
        {"group": "h", "size": 2, "ranks_present": 2, "workers": ["w0", "w2"], **common,
         "collectives": 1, "bytes": 2000, "transfer_us": 5.0, "busbw_gbps": 0.4,
         "total_wait_us": 0.0, "straggler": None, "straggler_share": 0.0},
        # one rank on one node: intra-node on the GPUs' link
        {"group": "k", "size": 1, "ranks_present": 1, "workers": ["w1"], "nodes": 1,
         "locality": "intra-node", "link": "NVLink", "peak_gbps": 450.0, "collectives": 1,
         "bytes": 100, "transfer_us": 3.0, "busbw_gbps": None, "total_wait_us": 0.0,
         "straggler": None, "straggler_share": 0.0}]}


def test_group_rows_links_and_unknown_nodes() -> None:
    keyed, table = _group_frames()
    nodes = ["n0", "n0", "n1"]
    amd = group_rows(["w0", "w1", "w2"], nodes, True, keyed, table, {"AMD Instinct MI300X"})
    assert [(r["link"], r["peak_gbps"]) for r in amd["rows"] if r["group"] == "k"] == [
        ("xGMI (Infinity Fabric)", 448.0)]
    unknown_gpu = group_rows(["w0", "w1", "w2"], nodes, True, keyed, table, {""})
    assert [(r["link"], r["peak_gbps"]) for r in unknown_gpu["rows"] if r["group"] == "k"] == [
        (None, None)]
    unknown = group_rows(["w0", "w1", "w2"], nodes, False, keyed, table, {H100})
    assert {(r["nodes"], r["locality"], r["link"], r["peak_gbps"]) for r in unknown["rows"]} == {
        (None, None, None, None)}
    assert group_rows(["w0"], ["n0"], True, keyed.iloc[:0], table.iloc[:0], set()) == {
        "total": 0, "rows": []}


def test_all_gather_size_uses_a_positive_finite_output_only() -> None:
    # S: the output when finite and above 0 (1 byte counts), else 2 ranks x the 10-byte input
    outs = [0.0, 1.0, math.inf, math.nan, -5.0, 64.0]
    rows = []
    for i, out in enumerate(outs):
        rows += [_call(w, i, AG, i, 2, nbytes=10, out=out) for w in (0, 1)]
    matched, _ = _frames(rows)
    assert collective_table(matched)["size"].tolist() == [20.0, 1.0, 20.0, 20.0, 20.0, 64.0]


def test_bandwidth_needs_a_positive_transfer_and_size() -> None:
    # all_reduce on 2 ranks: no transfer time -> none; 0.5 us -> 1000 B / 0.5 us = 2 GB/s;
    # 0 bytes -> none; 1 byte in 2 us -> 0.0005 GB/s; one rank of two -> none
    rows = [_call(w, 0, AR, 0, 0, nbytes=100) for w in (0, 1)]
    rows += [_call(w, 1, AR, 1, 0.5, nbytes=1000) for w in (0, 1)]
    rows += [_call(w, 2, AR, 2, 2, nbytes=0) for w in (0, 1)]
    rows += [_call(w, 3, AR, 3, 2, nbytes=1) for w in (0, 1)]
    rows += [_call(0, 4, AR, 4, 2, nbytes=1000, size=2)]
    matched, _ = _frames(rows)
    table = collective_table(matched)
    np.testing.assert_array_equal(table["algbw"], [np.nan, 2.0, np.nan, 0.0005, np.nan])
    np.testing.assert_array_equal(table["busbw"], [np.nan, 2.0, np.nan, 0.0005, np.nan])


def test_bandwidth_rows_sorted_by_kind_then_group_size() -> None:
    # first seen: reduce over 3 ranks, reduce over 2, all_gather over 2: rows sorted by kind
    # then size
    rows = [_call(w, 0, RED, 0, 2, nbytes=1000) for w in (0, 1, 2)]
    rows += [_call(w, 1, RED, 0, 2, nbytes=1000, group="h") for w in (0, 1)]
    rows += [_call(w, 2, AG, 0, 2, nbytes=1000) for w in (0, 1)]
    matched, _ = _frames(rows)
    assert [(r["collective"], r["group_size"]) for r in bandwidth_rows(matched, [])] == [
        ("all_gather", 2), ("reduce", 2), ("reduce", 3)]
