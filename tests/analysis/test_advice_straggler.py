"""Root cause across ranks (issue 24): the straggler comes first in every worker's Overview
advice when it imposes at least half of all communication wait, priced by the wait it causes,
and DDP bucket/overlap advice is silenced then. Generated three-rank gloo spans with
hand-derived waits pin the share and saving boundaries and the reason; the labelled DLRM run
(8 ranks, NCCL) must name worker7 first on every rank."""

from __future__ import annotations

from typing import Any

import pytest

from tb_plugin.analysis.advice.straggler import (
    STRAGGLER_MIN_PCT,
    STRAGGLER_WAIT_SHARE,
    advice_summary,
    run_advice,
    with_run_advice,
)
from tb_plugin.analysis.overview import build_overview
from tb_plugin.load import load_trace
from tb_plugin.views.registry import build_view
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, make_table, step

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
BASE_US = 100.0  # the shortest (the last arriver's) duration of every collective


def _rank(tmp_path, rank: int, waits: list[tuple[int, float]], step_us: float,
          extra: list[dict[str, Any]], late_step_us: float | None = None, ranks: int = 3):
    """One rank of `ranks`: a step of `step_us`, aten::mm over [0, 300), and one gloo all_reduce
    per (late rank, wait) ending at 1000, 2000, ...: the late rank's lasts BASE_US, the others
    wait `wait` longer (everyone leaves together). `extra` events and `late_step_us` go to the
    first collective's late rank."""
    straggler = rank == waits[0][0]
    events = [step(1, 0, late_step_us if straggler and late_step_us else step_us),
              cpu_op("aten::mm", 0, 300)]
    for k, (late, wait) in enumerate(waits):
        dur = BASE_US + (0.0 if rank == late else wait)
        events.append(cpu_op("gloo:all_reduce", 1000.0 * (k + 1) - dur, dur, ext=10 + k,
                             **{"Input Dims": [[1024]], "Input type": ["float"]}))
    return make_table(events + (extra if straggler else []), tmp_path,
                      distributedInfo={"backend": "gloo", "rank": rank, "world_size": ranks})


def _run(tmp_path, waits, step_us=5000.0, extra=(), late_step_us=None, ranks=3):
    tables = {f"rank{r}": _rank(tmp_path, r, waits, step_us, list(extra), late_step_us, ranks)
              for r in range(ranks)}
    return tables, run_advice({w: advice_summary(t) for w, t in tables.items()})


def test_the_straggler_fires_from_half_the_wait(tmp_path):
    # rank2 is last at the first all_reduce (the two others wait 500 us each), rank1 and rank0
    # at the others (250 each): rank2 imposes 1000 of 2000 us, exactly half
    assert STRAGGLER_WAIT_SHARE == 0.5
    _, run = _run(tmp_path, [(2, 500.0), (1, 250.0), (0, 250.0)])
    (item,) = run["recommendations"]
    assert run["straggler"] == "rank2" and item["id"] == "straggler"
    assert item["title"].startswith("rank2 (rank 2)") and "50% of all waiting" in item["text"]
    # priced by the wait it causes: 1000 us over the 2 other ranks, 1 step -> 500 us per rank
    # and step, 10% of the 5000 us step
    assert (item["saving_us"], item["saving_pct"]) == (500.0, 10.0)
    assert run["silences"] == ["communication_not_overlapped"]


def test_below_half_the_wait_nobody_is_named(tmp_path):
    # rank2 imposes 2 x 499 of 2 x (499 + 251 + 250) us: 49.9%
    _, run = _run(tmp_path, [(2, 499.0), (1, 251.0), (0, 250.0)])
    assert (run["recommendations"], run["silences"], run["straggler"]) == ([], [], None)


def test_the_saving_must_reach_its_minimum_share_of_the_step(tmp_path):
    # 500 us per rank and step: 5% of a 10000 us step fires, of 10001 us (4.9995%) does not
    assert STRAGGLER_MIN_PCT == 5.0
    _, at = _run(tmp_path, [(2, 500.0), (1, 250.0), (0, 250.0)], step_us=10000.0)
    assert at["recommendations"][0]["saving_pct"] == 5.0
    _, below = _run(tmp_path, [(2, 500.0), (1, 250.0), (0, 250.0)], step_us=10001.0)
    assert below["recommendations"] == []


@pytest.mark.parametrize(("extra", "late_step_us", "reason"), [
    # rank2 waits 500 us less than the median rank (100 + 200 + 200 us of all_reduce against
    # 700 + 200 + 100): with nothing else, that time is a host stall on rank2
    ([], None, "500 us more than the median rank's in a host stall"),
    # 700 us more of an operator (or of DataLoader) there: host compute (data loading) grows by
    # 700 and the stall shrinks by 200
    ([cpu_op("aten::addmm", 3000, 700)], None,
     "700 us more than the median rank's in host compute"),
    ([cpu_op(LOADER, 3000, 700)], None, "700 us more than the median rank's in data loading"),
    # 350 us of each: a tie goes to the first reason (data loading before host compute)
    ([cpu_op("aten::addmm", 3000, 350), cpu_op(LOADER, 3350, 350)], None,
     "350 us more than the median rank's in data loading"),
    # a step 1000 us shorter on rank2: no category exceeds the median rank's
    ([], 4000.0, "no more than the median rank's in compute, data loading or the host"),
])
def test_the_reason_comes_from_the_stragglers_own_breakdown(tmp_path, extra, late_step_us,
                                                            reason):
    _, run = _run(tmp_path, [(2, 600.0), (1, 100.0), (0, 100.0)], extra=extra,
                  late_step_us=late_step_us)
    assert reason in run["recommendations"][0]["text"]


@pytest.mark.parametrize(("waits", "late"), [
    ([(2, 600.0), (1, 100.0), (0, 100.0)], {"worker": "rank2", "skew_us": 600.0}),
    # rank2's two skews add up (300 + 200) above rank1's single larger one (400)
    ([(2, 300.0), (2, 200.0), (1, 400.0)], {"worker": "rank2", "skew_us": 500.0}),
    # a tie goes to the first worker by name
    ([(2, 300.0), (1, 300.0), (0, 100.0)], {"worker": "rank1", "skew_us": 300.0}),
])
def test_each_step_names_the_rank_its_collectives_waited_for(tmp_path, waits, late):
    _, run = _run(tmp_path, waits)
    assert run["late_by_step"] == {"1": late}


def test_two_ranks_are_enough(tmp_path):
    # rank1 is last at the only all_reduce: rank0 waits 500 us for it, all of the waiting
    _, run = _run(tmp_path, [(1, 500.0)], ranks=2)
    assert run["straggler"] == "rank1"
    assert (run["recommendations"][0]["saving_us"], run["recommendations"][0]["saving_pct"]) == (
        500.0, 10.0)


def test_one_rank_has_no_run_advice(tmp_path):
    tables, _ = _run(tmp_path, [(2, 600.0), (1, 100.0), (0, 100.0)])
    assert run_advice({"rank0": advice_summary(tables["rank0"])})["recommendations"] == []


def test_the_straggler_goes_first_and_silences_overlap_advice(tmp_path):
    tables, run = _run(tmp_path, [(2, 600.0), (1, 100.0), (0, 100.0)])
    own = [{"id": "startup_captured"}, {"id": "host_bound"},
           {"id": "communication_not_overlapped"}, {"id": "dataloader"}]
    merged = with_run_advice(own, run)
    assert [i["id"] for i in merged] == ["startup_captured", "straggler", "host_bound",
                                         "dataloader"]
    assert build_view(tables, "overview_run", {})["straggler"] == "rank2"


@needs_shared
def test_dlrm_first_recommendation_names_worker7_on_every_rank():
    """Labelled: 76% of all communication wait of the 8-rank DLRM run is worker7's (the
    Distributed view's straggler); every rank's first recommendation names it, and no DDP
    bucket/overlap advice remains."""
    paths = sorted((SHARED_TRACES / "param_dlrm_8ranks_nccl").glob("worker*.pt.trace.json"))
    assert len(paths) == 8
    tables = {p.name.split(".")[0]: load_trace(str(p), use_cache=False) for p in paths}
    run = run_advice({w: advice_summary(t) for w, t in tables.items()})
    for table in tables.values():
        items = with_run_advice(build_overview(table)["recommendations"], run)
        assert items[0]["id"] == "straggler" and items[0]["title"].startswith("worker7 ")
        assert "communication_not_overlapped" not in {i["id"] for i in items}
