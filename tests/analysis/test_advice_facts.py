"""`analysis.advice.facts`: the helpers every recommendation rule shares, at their boundaries
(severity grades inclusive at both cut-offs, time units at 1 ms and 1 s, word lists of 1, 2
and 3, the savings with no step time, the item's rounding and time range)."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.advice.facts import (
    HIGH,
    LOW,
    MEDIUM,
    SEVERITY_ORDER,
    Facts,
    api_name,
    fmt_time,
    grade,
    graphs_hint,
    join_words,
    make_item,
    pct_saving,
    share_pct,
    share_saving,
    steps_saving,
)


def test_grade_is_inclusive_at_both_cut_offs():
    assert [grade(v, 10.0, 20.0) for v in (0.0, 9.99, 10.0, 19.99, 20.0, 1e9)] == [
        LOW, LOW, MEDIUM, MEDIUM, HIGH, HIGH]
    assert (HIGH, MEDIUM, LOW) == ("high", "medium", "low")
    assert sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get) == [HIGH, MEDIUM, LOW]
    assert list(SEVERITY_ORDER.values()) == [0, 1, 2]


@pytest.mark.parametrize(("us", "text"), [
    (0.0, "0 us"), (12.4, "12 us"), (999.0, "999 us"), (1000.0, "1.0 ms"), (1549.0, "1.5 ms"),
    (999_000.0, "999.0 ms"), (1_000_000.0, "1.0 s"), (1_050_000.0, "1.1 s"),
    (12_345_678.0, "12.3 s"),
])
def test_fmt_time_units(us, text):
    assert fmt_time(us) == text


def test_join_words():
    assert join_words(["a"]) == "a"
    assert join_words(["a", "b"]) == "a and b"
    assert join_words(["a", "b", "c"]) == "a, b and c"
    assert join_words(["a", "b", "c", "d"]) == "a, b, c and d"


def test_api_name_and_graphs_hint():
    assert [api_name(Facts(average={}, vendor=v)) for v in ("amd", "nvidia", "unknown")] == [
        "HIP", "CUDA", "GPU runtime"]
    assert graphs_hint(Facts(average={})) == ", capture the step with CUDA/HIP graphs"
    for mode in ("replay", "capture"):
        assert graphs_hint(Facts(average={}, graph_mode=mode)) == ""


def test_savings_and_shares():
    facts = Facts(average={"Total": 200.0, "DataLoader": 50.0}, steps_us=1000.0, step_count=4)
    assert steps_saving(facts, 100.0) == (25.0, 10.0)
    assert steps_saving(Facts(average={}, steps_us=1000.0, step_count=0), 100.0) == (100.0,
                                                                                    10.0)
    assert steps_saving(Facts(average={}, steps_us=0.0, step_count=3), 100.0) is None
    assert steps_saving(Facts(average={}, steps_us=-1.0), 100.0) is None
    assert share_saving(facts, "DataLoader") == (50.0, 25.0)
    assert share_saving(facts, "Kernel") == (0.0, 0.0)
    assert share_saving(Facts(average={"Total": 0.0, "DataLoader": 5.0}), "DataLoader") is None
    assert share_saving(Facts(average={}), "DataLoader") is None
    assert pct_saving(facts, 10.0) == (20.0, 10.0)
    assert pct_saving(Facts(average={"Total": 0.0}), 10.0) is None
    assert pct_saving(Facts(average={}), 10.0) is None
    assert share_pct(facts, "DataLoader") == 25.0 and share_pct(facts, "Kernel") == 0.0
    assert share_pct(Facts(average={"Total": 0.0}), "DataLoader") is None
    assert share_pct(Facts(average={}), "DataLoader") is None


def test_make_item():
    item = make_item("rule", MEDIUM, "Title", "Text", "Trace", 12.3456, "%",
                     (("first", "https://a"), ("second", "https://b")), (1, 2.5),
                     (10.005, 3.14159))
    assert item == {"id": "rule", "severity": MEDIUM, "title": "Title", "text": "Text",
                    "view": "Trace", "metric": 12.35, "unit": "%", "start_us": 1.0,
                    "end_us": 2.5, "link": "https://a",
                    "links": [{"label": "first", "url": "https://a"},
                              {"label": "second", "url": "https://b"}],
                    "saving_us": round(10.005, 2), "saving_pct": 3.14}
    assert type(item["start_us"]) is float and type(item["metric"]) is float
    bare = make_item("rule", LOW, "T", "X", "Overview", 3, "GPUs")
    assert (bare["start_us"], bare["end_us"], bare["link"], bare["links"], bare["saving_us"],
            bare["saving_pct"], bare["metric"]) == (None, None, None, [], None, None, 3.0)
    assert make_item("r", LOW, "T", "X", "V", 0.0, "%", where=(0.0, 0.0))["start_us"] == 0.0


def test_savings_and_shares_below_one_us():
    """Only a zero (or negative) step time or total is "nothing to price": half a microsecond
    is priced."""
    assert steps_saving(Facts(average={}, steps_us=0.5, step_count=1), 0.25) == (0.25, 50.0)
    small = Facts(average={"Total": 0.5, "DataLoader": 0.25})
    assert share_saving(small, "DataLoader") == (0.25, 50.0)
    assert pct_saving(small, 10.0) == (0.05, 10.0)
    assert share_pct(small, "DataLoader") == 50.0
