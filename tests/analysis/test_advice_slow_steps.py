"""`analysis.advice.slow_steps` and `stalls` on hand-made facts: each cause's wording and link,
the "other outliers" grammar for 1, 2 and 3 outliers, the severity grades of the saving, no
time range without one, no advice without step time; the device-stall rule at its 10%
boundary, its grades and its longest-stall text."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.advice import slow_steps as S
from tb_plugin.analysis.advice.facts import Facts
from tb_plugin.analysis.advice.stalls import STALL_PCT, rule_device_stall


def _outlier(step, excess, cause="data_loading", start=7_010.0):
    return {"step": step, "total_us": 1.0, "excess_us": excess, "z": 12.34, "cause": cause,
            "cause_us": 2_000.0, "start_us": start, "end_us": None if start is None else
            start + 100.0}


def _facts(outliers, cv=20.0, steps_us=100_000.0):
    return Facts(average={"Total": 1.0}, steps_us=steps_us, step_count=10,
                 variance={"cv_pct": cv, "outliers": outliers})


@pytest.mark.parametrize(("cause", "grew", "url"), [
    ("data_loading", "its DataLoader waited 2.0 ms longer than in the median step",
     S.URL_DATALOADER),
    ("host_compute", "its host operators ran 2.0 ms longer than in the median step", None),
    ("synchronisation", "its synchronising calls waited 2.0 ms longer than in the median step",
     S.URL_SYNC),
    ("communication", "its collectives waited 2.0 ms longer than in the median step", None),
    ("device", "its device work ran 2.0 ms longer than in the median step", None),
    ("host_stall", "it spent 2.0 ms more than the median step with no operator running",
     S.URL_GC),
])
def test_each_cause(cause, grew, url):
    item = S.rule_slow_steps(_facts([_outlier("7", 3_000.0, cause)]))
    assert item["title"] == "Step 7 is 3.0 ms slower than the median"
    assert item["text"].startswith("Step 7 is 3.0 ms slower than the median step (robust z "
                                   f"12.3; step-time CV 20.0%, flagged from 10%): {grew}. ")
    assert item["text"].endswith(S._CAUSES[cause][1])
    assert item["link"] == url
    assert item["links"] == ([{"label": "Further reading", "url": url}] if url else [])
    assert (item["view"], item["metric"], item["unit"]) == ("Trace", 20.0, "%")


def test_other_outliers_grammar_and_the_summed_saving():
    one = S.rule_slow_steps(_facts([_outlier("7", 3_000.0)]))
    assert "outlier too" not in one["text"]
    two = S.rule_slow_steps(_facts([_outlier("7", 3_000.0), _outlier("2", 1_000.0)]))
    assert ". 1 other step is an outlier too. " in two["text"]
    assert (two["saving_us"], two["saving_pct"]) == (400.0, 4.0)  # 4 ms over 10 steps
    three = S.rule_slow_steps(_facts([_outlier("7", 3_000.0), _outlier("2", 1_000.0),
                                      _outlier("4", 1_000.0)]))
    assert ". 2 other steps are an outlier too. " in three["text"]


@pytest.mark.parametrize(("excess", "severity"), [
    (4_999.0, "low"), (5_000.0, "medium"), (14_999.0, "medium"), (15_000.0, "high")])
def test_severity_by_saving(excess, severity):
    assert S.rule_slow_steps(_facts([_outlier("7", excess)]))["severity"] == severity


def test_time_range_and_silences():
    item = S.rule_slow_steps(_facts([_outlier("7", 3_000.0)]))
    assert (item["start_us"], item["end_us"]) == (7_010.0, 7_110.0)
    bare = S.rule_slow_steps(_facts([_outlier("7", 3_000.0, start=None)]))
    assert (bare["start_us"], bare["end_us"]) == (None, None)
    assert S.rule_slow_steps(_facts([_outlier("7", 3_000.0)], steps_us=0.0)) is None
    assert S.rule_slow_steps(_facts([_outlier("7", 3_000.0)], cv=None)) is None
    assert S.rule_slow_steps(_facts([], cv=50.0)) is None
    assert S.rule_slow_steps(Facts(average={"Total": 1.0}, steps_us=1.0)) is None
    assert S.rule_slow_steps(_facts([_outlier("7", 3_000.0)], cv=S.CV_PCT)) is not None


def _stall(stalled, **kw):
    return Facts(average={"Total": 1.0}, steps_us=10_000.0, step_count=2, stalled_us=stalled,
                 **kw)


def test_device_stall_boundaries_and_grades():
    assert STALL_PCT == 10.0
    assert rule_device_stall(_stall(999.0)) is None
    item = rule_device_stall(_stall(1_000.0))
    assert (item["id"], item["severity"], item["saving_us"], item["saving_pct"]) == (
        "device_stalled", "low", 500.0, 10.0)
    assert rule_device_stall(_stall(2_500.0))["severity"] == "medium"
    assert rule_device_stall(_stall(2_499.0))["severity"] == "low"
    assert rule_device_stall(_stall(5_000.0))["severity"] == "high"
    assert rule_device_stall(_stall(4_999.0))["severity"] == "medium"
    assert rule_device_stall(_stall(5_000.0, graph_mode="capture")) is None
    assert rule_device_stall(_stall(5_000.0, graph_mode="replay")) is not None
    assert rule_device_stall(Facts(average={}, stalled_us=5.0)) is None  # no step time


def test_device_stall_text_names_the_longest_stall():
    item = rule_device_stall(_stall(3_000.0, stall_range=(100.0, 1_600.0)))
    assert item["text"].startswith("For 1.5 ms per step (30.0% of the step) the GPU had work "
                                   "queued (its launch call had returned more than ")
    assert "ran nothing (the longest: 1.5 ms). Neither" in item["text"]
    assert (item["start_us"], item["end_us"], item["view"]) == (100.0, 1_600.0, "Trace")
    bare = rule_device_stall(_stall(3_000.0))
    assert "ran nothing. Neither" in bare["text"] and bare["start_us"] is None
