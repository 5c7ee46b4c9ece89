"""Run-level what-if (issue 24): generated CPU gloo spans whose ranks are chains of host work
and collectives (everyone leaves a collective together), with the predictions derived by hand
in the comments: the straggler removed (wholly and halfway), communication overlapped fully,
groups of 2 and 3 ranks, a rank missing a collective, a collective only one rank recorded,
and the unknown rank."""

from __future__ import annotations

from typing import Any

import pytest

from tb_plugin.analysis.advice.straggler import advice_summary, run_advice
from tb_plugin.analysis.whatif import EditError, parse_edits
from tb_plugin.analysis.whatif.edits import RUN_TARGETS
from tb_plugin.analysis.whatif.ranks import build_whatif_run
from tb_plugin.views.errors import OptionError
from tb_plugin.views.registry import build_view

from .helpers import cpu_op, make_table, step


def _span(tmp_path, ranks: list[list[tuple[str, float, float, dict[str, Any]]]],
          step_us: float | tuple[float, ...], shifts: tuple[float, ...] = ()) -> dict[str, Any]:
    """One table per rank: step 1 over [0, step_us) and its collectives (name, start, end,
    args) as host ranges of gloo calls; rank r's clock runs `shifts[r]` us ahead."""
    tables = {}
    for r, calls in enumerate(ranks):
        at = shifts[r] if r < len(shifts) else 0.0
        events = [step(1, at, step_us[r] if isinstance(step_us, tuple) else step_us)]
        events += [cpu_op(name, at + start, end - start, ext=100 * r + k,
                          **{"Input Dims": [[1024]], "Input type": ["float"], **args})
                   for k, (name, start, end, args) in enumerate(calls)]
        tables[f"rank{r}"] = make_table(events, tmp_path, distributedInfo={
            "backend": "gloo", "rank": r, "world_size": len(ranks)})
    return tables


def _run(tables: dict[str, Any], edit: str) -> dict[str, Any]:
    return build_whatif_run(tables, parse_edits(edit, RUN_TARGETS))


AR = "gloo:all_reduce"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    # rank0 works 100 us, rank1 300 us, then an all_reduce that ends at 400 on both (transfer
    # 100: rank1's, the last arriver's, duration), then 600 us of work to the step's end 1000
    return _span(tmp_path_factory.mktemp("two"), [[(AR, 100, 400, {})], [(AR, 300, 400, {})]],
                 1000)


@pytest.mark.parametrize(("edit", "predicted", "resolved", "new_last"), [
    # rank1's 300 us -> rank0's 100: both arrive at 100, leave at 200, end at 800
    ("straggler=0", 800.0, "rank:rank1=0", None),
    ("rank:rank1=0", 800.0, "rank:rank1=0", None),
    ("rank:1=0", 800.0, "rank:rank1=0", None),  # by rank number
    # halfway: 100 + 0.5 x (300 - 100) = 200 -> leaves at 300, ends at 900; still last
    ("rank:rank1=0.5", 900.0, "rank:rank1=0.5", "rank1"),
    # transfer 0: the all_reduce ends when rank1 arrives, 300 -> 900
    ("transfer=0", 900.0, "transfer=0", "rank1"),
    ("straggler=0; transfer=0", 700.0, "rank:rank1=0", None),
    # the fast rank to the other's 300: both arrive at 300, nothing changes but nobody waits
    ("rank:rank0=0", 1000.0, "rank:rank0=0", None),
])
def test_two_ranks(two, edit, predicted, resolved, new_last):
    out = _run(two, edit)
    assert (out["original_us"], out["replayed_us"]) == (1000.0, 1000.0)
    assert out["predicted_us"] == predicted and out["resolved"][0] == resolved
    assert out["saving_us"] == 1000.0 - predicted
    assert out["saving_pct"] == pytest.approx((1000.0 - predicted) / 10.0)
    assert (out["last"], out["new_last"]) == ("rank1", new_last)
    assert [(r["worker"], r["predicted_us"]) for r in out["ranks"]] == [
        ("rank0", predicted), ("rank1", predicted)]
    assert [(s["step"], s["last"], s["new_last"]) for s in out["steps"]] == [
        ("1", "rank1", new_last)]


def test_clocks_that_differ_between_hosts_change_nothing(tmp_path):
    # the two-rank span with rank1's clock 5 s ahead: the offsets from collective ends align it
    shifted = _span(tmp_path, [[(AR, 100, 400, {})], [(AR, 300, 400, {})]], 1000,
                    shifts=(0.0, 5e6))
    out = _run(shifted, "straggler=0")
    assert (out["replayed_us"], out["predicted_us"], out["last"]) == (1000.0, 800.0, "rank1")


def test_two_ranks_waits(two):
    out = _run(two, "straggler=0")
    rank0, rank1 = out["ranks"]
    # rank0 waited 200 us for rank1, which waited for nobody; after the edit nobody waits
    assert (rank0["wait_us"], rank0["imposed_wait_us"]) == (200.0, 0.0)
    assert (rank1["wait_us"], rank1["imposed_wait_us"]) == (0.0, 200.0)
    assert (rank0["predicted_wait_us"], rank1["predicted_imposed_wait_us"]) == (0.0, 0.0)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    # all_reduce 1: arrivals 100, 200, 500 -> leaves at 600 (transfer 100); all_reduce 2: after
    # 300, 500, 200 us -> arrivals 900, 1100, 800 -> leaves at 1200; 800 us to the end, 2000.
    # rank2 imposes 400 + 300 = 700 us, rank1 200 + 300 = 500: rank2 is the straggler
    return _span(tmp_path_factory.mktemp("three"), [
        [(AR, 100, 600, {}), (AR, 900, 1200, {})],
        [(AR, 200, 600, {}), (AR, 1100, 1200, {})],
        [(AR, 500, 600, {}), (AR, 800, 1200, {})]], 2000)


def test_three_ranks_the_straggler_removed(three):
    out = _run(three, "straggler=0")
    # rank2's segments -> medians of the others': 150 (100, 200), 400 (300, 500), 800.
    # all_reduce 1: arrivals 100, 200, 150 -> leaves at 300; all_reduce 2: 600, 800, 700 ->
    # leaves at 900; the step ends at 1700
    assert out["resolved"] == ["rank:rank2=0"] and out["replayed_us"] == 2000.0
    assert out["predicted_us"] == 1700.0 and out["saving_us"] == 300.0
    # now rank1 is last at both: it imposes 100 + 50 and 200 + 100 us
    assert (out["last"], out["new_last"]) == ("rank2", "rank1")
    assert [r["predicted_imposed_wait_us"] for r in out["ranks"]] == [0.0, 450.0, 0.0]
    assert [r["wait_us"] for r in out["ranks"]] == [600.0, 300.0, 300.0]


def test_three_ranks_overlapped(three):
    # transfer 0: all_reduce 1 ends at 500, all_reduce 2 at max(800, 1000, 700) = 1000 -> 1800
    out = _run(three, "transfer=0")
    assert out["predicted_us"] == 1800.0 and out["new_last"] == "rank2"


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    # ranks 0 and 1 share group "pair" (size 2): an all_reduce with arrivals 100 and 400 that
    # leaves at 500; then all three (group "0", size 3) after 200 us on 0 and 1 (arrive 700) and
    # 900 us on rank2 (from its step start): leaves at 1000; 1000 us of work to 2000
    pair = {"Process Group Name": "pair", "Group size": 2}
    world = {"Process Group Name": "0", "Group size": 3}
    return _span(tmp_path_factory.mktemp("groups"), [
        [(AR, 100, 500, pair), (AR, 700, 1000, world)],
        [(AR, 400, 500, pair), (AR, 700, 1000, world)],
        [(AR, 900, 1000, world)]], 2000)


def test_the_median_of_the_other_ranks(tmp_path):
    # four ranks arrive at 100, 100, 150 and 1000 (rank3) at an all_reduce that ends at 1100,
    # then work 500, 500, 800 and 900 us to their step ends (1600, 1600, 1900, 2000)
    tables = _span(tmp_path, [[(AR, 100, 1100, {})], [(AR, 100, 1100, {})],
                              [(AR, 150, 1100, {})], [(AR, 1000, 1100, {})]],
                   (1600.0, 1600.0, 1900.0, 2000.0))
    out = _run(tables, "straggler=0")
    # rank3 -> medians 100 (of 100, 100, 150) and 500 (of 500, 500, 800; a mean would give
    # 600): the all_reduce leaves at 150 + 100; steps 750, 750, 1050, 750
    assert out["replayed_us"] == out["original_us"] == 1775.0
    assert [r["predicted_us"] for r in out["ranks"]] == [750.0, 750.0, 1050.0, 750.0]
    assert out["predicted_us"] == 825.0


def test_groups_of_two_and_three(groups):
    base = _run(groups, "transfer=1")
    # rank1 imposes 300 us on rank0 in the pair, rank2 200 + 200 at the world all_reduce
    assert base["replayed_us"] == 2000.0 and base["last"] == "rank2"
    assert [r["imposed_wait_us"] for r in base["ranks"]] == [0.0, 300.0, 400.0]
    # rank1's lateness in the pair is hidden by rank2's: 100 -> leaves at 200, arrives at 400
    # for the world all_reduce, which still waits for rank2 until 900: no saving
    assert _run(groups, "rank:rank1=0")["predicted_us"] == 2000.0
    # rank2's segment from its step start to the world all_reduce has no counterpart (the
    # others come from the pair's): it takes the median of the others' segments ending there,
    # 200 -> rank2 arrives at 200 and waits for the others (700): leaves at 800, ends at 1800
    out = _run(groups, "straggler=0")
    assert out["resolved"] == ["rank:rank2=0"] and out["predicted_us"] == 1800.0
    # rank0 and rank1 tie at 700 at the world all_reduce: the first by index is last there,
    # imposing rank2's 500 us, more than rank1's 300 in the pair
    assert out["new_last"] == "rank0"
    assert [r["predicted_imposed_wait_us"] for r in out["ranks"]] == [500.0, 300.0, 0.0]


def test_a_rank_missing_a_collective(tmp_path):
    # a broadcast only ranks 0 and 1 recorded (of 3): it synchronises them alone (arrivals
    # 100, 300 -> leaves at 400); the all_reduce of all three: rank0 and rank1 arrive at 600,
    # rank2 at 1000 -> leaves at 1100; rank0 alone records a barrier [1500, 1600): nobody to
    # wait for, it keeps its 100 us. Steps end at 2000.
    tables = _span(tmp_path, [
        [("gloo:broadcast", 100, 400, {}), (AR, 600, 1100, {}), ("gloo:barrier", 1500, 1600, {})],
        [("gloo:broadcast", 300, 400, {}), (AR, 600, 1100, {})],
        [(AR, 1000, 1100, {})]], 2000)
    out = _run(tables, "straggler=0")
    # rank2's 1000 us before the all_reduce -> 200 (the others' from the broadcast): it waits
    # for them, the all_reduce leaves at 700; the tail 900 (all the same) -> 1600
    assert out["replayed_us"] == 2000.0 and out["resolved"] == ["rank:rank2=0"]
    assert [r["predicted_us"] for r in out["ranks"]] == [1600.0, 1600.0, 1600.0]
    # rank1 is still last at the broadcast (200); rank0 and rank1 tie at the all_reduce: the
    # first by index is last, imposing rank2's 400 us
    assert out["new_last"] == "rank0"
    assert [r["predicted_imposed_wait_us"] for r in out["ranks"]] == [400.0, 200.0, 0.0]


def test_an_unknown_rank_is_an_edit_error(two):
    with pytest.raises(EditError, match="no worker or rank 'rank7'"):
        _run(two, "rank:rank7=0")
    with pytest.raises(OptionError, match="an edit of one worker"):
        build_view(two, "whatif_run", {}, edit="launch=0")
    with pytest.raises(EditError, match="a run-level edit"):
        parse_edits("straggler=0")


def test_one_rank_predicts_its_own_step(two):
    out = _run({"rank0": two["rank0"]}, "straggler=0")
    assert (out["predicted_us"], out["last"]) == (1000.0, None)
    assert out["notes"][-1] == "one rank: nothing waits for another rank"


def test_the_straggler_advice_carries_its_edit_and_evidence(three):
    item = run_advice({w: advice_summary(t) for w, t in three.items()})["recommendations"][0]
    # priced by the engine (test_three_ranks_the_straggler_removed): 300 of 2000 us
    assert (item["whatif"], item["saving_us"], item["saving_pct"]) == ("rank:rank2=0", 300.0,
                                                                       15.0)
    # its largest imposed wait: all_reduce 1 (700 us in all), rank2 arrived at 500 with a skew
    # of 400: the range [100, 500) of step 1, 100 us into it
    assert (item["evidence_step"], item["evidence_offset_us"]) == ("1", 100.0)
    assert (item["start_us"], item["end_us"]) == (100.0, 500.0)


def test_ranks_without_collectives_replay_their_steps(tmp_path):
    # no communication at all: every rank runs its own step (1000 and 1500 us), nothing waits
    tables = {f"rank{r}": make_table([step(1, 0, 1000.0 + 500 * r)], tmp_path)
              for r in range(2)}
    out = _run(tables, "straggler=0; transfer=0")
    assert [(r["original_us"], r["predicted_us"]) for r in out["ranks"]] == [
        (1000.0, 1000.0), (1500.0, 1500.0)]
    assert out["predicted_us"] == 1250.0 and out["last"] is None
    assert out["notes"] == ["straggler=0: no rank arrives last with a wait, nothing to remove"]


def test_collectives_in_different_orders_are_released(tmp_path):
    # rank0 calls all_reduce [100, 400) then broadcast [500, 600); rank1 broadcast [100, 200)
    # then all_reduce [300, 400): each waits for the other's first call. Clock offsets (median
    # of each rank's collective ends minus their median: all_reduce 400/400, broadcast 600/200)
    # are +100 and -100 us, so rank0 starts at -100 and rank1 at +100 on the run clock. rank0
    # reaches the all_reduce at 0, rank1 the broadcast at 200: the replay releases the
    # collective most ranks reached (a tie: the first, the all_reduce) with rank0 alone: 0 +
    # transfer 100 -> 100; + 100 -> broadcast at 200 with rank1: both leave at 300; rank0
    # + 400 -> 700, a step of 800. rank1 + 100 -> the all_reduce at 400, now its own 100 us
    # -> 500, + 600 -> 1100, a step of 1000.
    tables = _span(tmp_path, [[(AR, 100, 400, {}), ("gloo:broadcast", 500, 600, {})],
                              [("gloo:broadcast", 100, 200, {}), (AR, 300, 400, {})]], 1000)
    out = _run(tables, "transfer=1")
    assert [r["replayed_us"] for r in out["ranks"]] == [800.0, 1000.0]
    assert out["notes"] == ["1 collectives were recorded in different orders on different "
                            "ranks: replayed without waiting for the ranks that had not "
                            "arrived"]


def test_waits_are_per_step_means_over_two_steps(tmp_path):
    # each rank: steps 1 [0, 1000) and 2 [1000, 2000), one all_reduce each; rank0 arrives at
    # 100 / 1100, rank1 at 300 / 1300, both leave at 400 / 1400: per step rank0 waits 200 us
    # for rank1. Per rank, the mean over its 2 steps: wait 400 / 2, imposed 400 / 2.
    tables = {}
    for r, arrive in enumerate((100.0, 300.0)):
        events = [step(1, 0, 1000), step(2, 1000, 1000)]
        events += [cpu_op(AR, base + arrive, 400 - arrive, ext=10 * r + k,
                          **{"Input Dims": [[1024]], "Input type": ["float"]})
                   for k, base in enumerate((0.0, 1000.0))]
        tables[f"rank{r}"] = make_table(events, tmp_path, distributedInfo={
            "backend": "gloo", "rank": r, "world_size": 2})
    out = _run(tables, "straggler=0")
    assert [(r["worker"], r["wait_us"], r["imposed_wait_us"]) for r in out["ranks"]] == [
        ("rank0", 200.0, 0.0), ("rank1", 0.0, 200.0)]
    # rank1's segments -> rank0's: both arrive at 100, leave at 200: 800 us a step, no waits
    assert [(r["original_us"], r["predicted_us"], r["predicted_wait_us"],
             r["predicted_imposed_wait_us"]) for r in out["ranks"]] == [
        (1000.0, 800.0, 0.0, 0.0), (1000.0, 800.0, 0.0, 0.0)]
    assert [(s["step"], s["original_us"], s["predicted_us"], s["last"], s["new_last"])
            for s in out["steps"]] == [("1", 1000.0, 800.0, "rank1", None),
                                       ("2", 1000.0, 800.0, "rank1", None)]
    half = _run(tables, "rank:rank1=0.5")  # arrives at 200: rank0 waits 100 a step
    assert [(r["predicted_wait_us"], r["predicted_imposed_wait_us"]) for r in half["ranks"]] == [
        (100.0, 0.0), (0.0, 100.0)]


def test_an_unknown_rank_names_the_workers(two, tmp_path):
    with pytest.raises(EditError) as caught:
        _run(two, "rank:rank7=0.5")
    assert str(caught.value) == ("rank:rank7=0.5: no worker or rank 'rank7' in this span "
                                 "(workers: rank0, rank1)")
    # 17 workers: the first 16 named, then "..."
    many = {f"w{i:02d}": two["rank0"] for i in range(17)}
    with pytest.raises(EditError) as caught:
        _run(many, "rank:x=0")
    assert str(caught.value) == ("rank:x=0: no worker or rank 'x' in this span (workers: "
                                 + ", ".join(f"w{i:02d}" for i in range(16)) + ", ...)")
    exactly = {f"w{i:02d}": two["rank0"] for i in range(16)}
    with pytest.raises(EditError) as caught:
        _run(exactly, "rank:x=0")
    assert str(caught.value).endswith(", w15)")
