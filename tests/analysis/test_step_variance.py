"""Step variance and slow-step root cause (`analysis.variance.steps`) on generated traces with
hand-derived numbers: the CV, the robust z-score and its strict threshold, the MAD-0 fallback,
one test per cause (the outlier's extra time is one event of that cause), ties, and the
slow-step recommendation (`analysis.advice.slow_steps`) at its CV boundary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tb_plugin.analysis.advice.recommendations import Facts, recommend
from tb_plugin.analysis.advice.slow_steps import CV_PCT, rule_slow_steps
from tb_plugin.analysis.overview import build_overview
from tb_plugin.analysis.steps import Steps
from tb_plugin.analysis.variance.steps import (
    CAUSES,
    Z_THRESHOLD,
    cause_split,
    robust_z,
    slow_mask,
    step_variance,
)

from .helpers import cpu_op, kernel, make_table, py, runtime, step

PERIOD = 10_000.0  # steps start every 10 ms; a normal step lasts 1000 us
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _steps(lengths: list[float], extra: list[dict] | None = None) -> list[dict]:
    """One ProfilerStep per length, each with aten::mm over its first 600 us (the rest of a
    normal step is a 400 us host stall)."""
    events = []
    for i, length in enumerate(lengths):
        events += [step(i + 1, i * PERIOD, length), cpu_op("aten::mm", i * PERIOD, 600)]
    return events + (extra or [])


def test_cv_and_the_mad_zero_fallback_are_hand_derived(tmp_path):
    # 100,100,100,100,200: mean 120, population std sqrt((4*20^2 + 80^2)/5) = 40, CV 33.33%;
    # MAD 0, so z = 100 / (1.253314 * mean |t - 100| = 20) = 3.9894 > 3.5
    v = step_variance(make_table(_steps([100, 100, 100, 100, 200]), tmp_path))
    assert (v["steps"], v["mean_us"], v["median_us"], v["std_us"]) == (5, 120.0, 100.0, 40.0)
    assert v["cv_pct"] == 33.333  # 100 / 3, 3 decimals
    (outlier,) = v["outliers"]
    assert outlier["step"] == "5" and outlier["excess_us"] == 100.0
    assert outlier["z"] == 3.989  # 100 / (1.253314 * 20) = 3.98942..., 3 decimals


def test_the_threshold_is_strict(tmp_path):
    assert Z_THRESHOLD == 3.5
    assert list(slow_mask(np.array([3.5, math.nextafter(3.5, 4.0), 3.4]))) == [False, True, False]
    # median 1000 and MAD m = 2.75 (abs deviations 0,0,0,m,m,2m,2m,d): z = 0.6745 d / m, so
    # d = 14.26 gives 3.4976 (not an outlier) and d = 14.28 gives 3.5025 (an outlier)
    m = 2.75
    base = [1000 - 2 * m, 1000 - m, 1000, 1000, 1000, 1000 + m, 1000 + 2 * m]
    below = step_variance(make_table(_steps([*base, 1014.26]), tmp_path))
    assert below["outliers"] == []
    above = step_variance(make_table(_steps([*base, 1014.28]), tmp_path))
    assert [o["step"] for o in above["outliers"]] == ["8"]
    assert above["outliers"][0]["z"] == 3.502  # 0.6745 * 14.28 / m = 9.63186 / 2.75 = 3.50249


def test_fast_steps_two_steps_and_equal_steps_hold_no_outlier(tmp_path):
    fast = step_variance(make_table(_steps([1000, 1000, 1000, 1000, 100]), tmp_path))
    assert fast["outliers"] == [] and fast["cv_pct"] > CV_PCT  # z = -3.99: fast, not slow
    assert step_variance(make_table(_steps([1000, 5000]), tmp_path))["outliers"] == []
    assert list(robust_z([7.0, 7.0, 7.0])) == [0.0, 0.0, 0.0]
    assert robust_z([1.0, 9.0])[1] == pytest.approx(0.6745)


# Each cause: four 1000 us steps and a fifth of 2000 us whose extra 1000 us (from 1000 to
# 2000 into the step) is one event of that cause.
AT = 4 * PERIOD + 1000
CAUSE_EVENTS = {
    "data_loading": [cpu_op(LOADER, AT, 1000), cpu_op("aten::stack", AT + 100, 200)],
    "host_compute": [cpu_op("aten::add", AT, 1000)],
    "synchronisation": [cpu_op("aten::_local_scalar_dense", AT, 1000),
                        runtime(AT, 1000, corr=9, name="cudaStreamSynchronize")],
    "communication": [cpu_op("c10d::allreduce_", AT, 1000)],
    "device": [runtime(AT - 410, 5, corr=7), kernel(AT, 1000, corr=7)],
    "host_stall": [py("<built-in function sleep>", AT, 1000, python_id=1)],
}


@pytest.mark.parametrize("cause", CAUSES)
def test_each_cause_is_named_with_its_range(tmp_path, cause):
    v = step_variance(make_table(_steps([1000] * 4 + [2000], CAUSE_EVENTS[cause]), tmp_path))
    (outlier,) = v["outliers"]
    assert (outlier["step"], outlier["cause"], outlier["cause_us"]) == ("5", cause, 1000.0)
    assert outlier["excess_us"] == 1000.0
    assert {c: g for c, g in outlier["growth_us"].items() if g} == {cause: 1000.0}
    # the evidence is the longest range of the cause in the step: the stall joins the step's
    # usual 400 us stall after aten::mm
    start = 4 * PERIOD + 600 if cause == "host_stall" else AT
    assert (outlier["start_us"], outlier["end_us"]) == (start, AT + 1000)
    assert outlier["evidence_offset_us"] == start - 4 * PERIOD


@pytest.mark.parametrize(("higher", "lower"), [
    ("communication", "synchronisation"), ("synchronisation", "data_loading"),
    ("data_loading", "host_compute"), ("host_compute", "device"), ("device", "host_stall"),
])
def test_overlapping_causes_go_to_the_first(tmp_path, higher, lower):
    # both causes' events cover the same extra 1000 us: it all goes to the earlier in CAUSES
    events = CAUSE_EVENTS[higher] + CAUSE_EVENTS[lower]
    v = step_variance(make_table(_steps([1000] * 4 + [2000], events), tmp_path))
    growth = v["outliers"][0]["growth_us"]
    assert (v["outliers"][0]["cause"], growth[higher], growth[lower]) == (higher, 1000.0, 0.0)


@pytest.mark.parametrize(("loader_us", "cause"), [
    (500, "data_loading"),  # a tie goes to the first cause in CAUSES
    (499, "host_compute"),
    (501, "data_loading"),
])
def test_ties_go_to_the_first_cause(tmp_path, loader_us, cause):
    extra = [cpu_op("aten::add", AT, 1000 - loader_us), cpu_op(LOADER, AT + 1000 - loader_us,
                                                              loader_us)]
    v = step_variance(make_table(_steps([1000] * 4 + [2000], extra), tmp_path))
    assert v["outliers"][0]["cause"] == cause
    assert CAUSES.index("data_loading") < CAUSES.index("host_compute")


def _variance(cv_pct: float, excess: float = 58_000.0) -> dict:
    return {"steps": 10, "mean_us": 1.0, "median_us": 1.0, "std_us": 1.0, "cv_pct": cv_pct,
            "z_threshold": 3.5, "outliers": [{
                "step": "7", "total_us": 100_000.0, "excess_us": excess, "z": 40.0,
                "cause": "data_loading", "cause_us": 50_000.0,
                "growth_us": dict.fromkeys(CAUSES, 0.0) | {"data_loading": 50_000.0},
                "start_us": 7_010.0, "end_us": 57_010.0, "evidence_offset_us": 10.0}]}


def test_the_slow_step_rule_fires_from_its_cv_threshold_and_is_priced_per_step():
    assert CV_PCT == 10.0
    below = Facts(average={"Total": 1.0}, steps_us=1e6, step_count=10,
                  variance=_variance(math.nextafter(CV_PCT, 0)))
    assert rule_slow_steps(below) is None
    at = Facts(average={"Total": 1.0}, steps_us=1e6, step_count=10, variance=_variance(CV_PCT),
               step_bounds=[("7", 7_000.0, 107_000.0)])
    item = rule_slow_steps(at)
    assert item["id"] == "slow_step"
    assert "Step 7 is 58.0 ms slower" in item["text"]
    assert "DataLoader waited 50.0 ms" in item["text"]
    assert (item["saving_us"], item["saving_pct"]) == (5_800.0, 5.8)  # 58 ms / 10 steps
    assert (item["start_us"], item["end_us"]) == (7_010.0, 57_010.0)
    (located,) = recommend(at)
    assert (located["evidence_step"], located["evidence_offset_us"]) == ("7", 10.0)


def test_the_rule_is_silent_without_outliers():
    quiet = _variance(50.0)
    quiet["outliers"] = []
    assert rule_slow_steps(Facts(average={"Total": 1.0}, steps_us=1e6, step_count=10,
                                 variance=quiet)) is None


def test_overview_carries_the_variance_and_the_advice(tmp_path):
    table = make_table(_steps([1000] * 4 + [2000], CAUSE_EVENTS["data_loading"]), tmp_path)
    overview = build_overview(table)
    assert overview["variance"]["outliers"][0]["cause"] == "data_loading"
    (item,) = [r for r in overview["recommendations"] if r["id"] == "slow_step"]
    # one outlier 1000 us over the median, over 5 steps of 6000 us in all
    assert (item["saving_us"], item["saving_pct"]) == (200.0, round(100 * 1000 / 6000, 2))
    assert (item["evidence_step"], item["evidence_offset_us"]) == ("5", 1000.0)


def _r(*pairs: tuple[float, float]):
    return (np.array([p[0] for p in pairs], dtype=np.float64),
            np.array([p[1] for p in pairs], dtype=np.float64))


def test_cause_split_by_hand_with_causes_missing():
    # steps [0, 100) and [100, 200) with a gap-free cover; communication [10, 30),
    # device [20, 60) and [150, 160) and [195, 230) (beyond the last step); no other cause
    steps = Steps(names=["1", "2"], starts=np.array([0.0, 100.0]), ends=np.array([100.0, 200.0]),
                  host_starts=np.array([0.0, 100.0]), host_ends=np.array([100.0, 200.0]))
    roles = {"communication": _r((10, 30)), "device": _r((20, 60), (150, 160), (195, 230))}
    costs, taken = cause_split(roles, steps)
    assert list(costs) == list(CAUSES) and list(taken) == list(CAUSES)
    assert costs["communication"].tolist() == [20.0, 0.0]
    assert costs["device"].tolist() == [30.0, 15.0]  # [30, 60): 30; [150, 160) + [195, 200)
    for cause in ("synchronisation", "data_loading", "host_compute"):
        assert costs[cause].tolist() == [0.0, 0.0] and taken[cause][0].size == 0
    assert costs["host_stall"].tolist() == [50.0, 85.0]
    assert [float(sum(costs[c][i] for c in CAUSES)) for i in range(2)] == [100.0, 100.0]
    assert (taken["device"][0].tolist(), taken["device"][1].tolist()) == (
        [30.0, 150.0, 195.0], [60.0, 160.0, 200.0])
    assert (taken["host_stall"][0].tolist(), taken["host_stall"][1].tolist()) == (
        [0.0, 60.0, 160.0], [10.0, 150.0, 195.0])
