"""The bootstrap and verdict rules of `torch-prof compare` (analysis/compare/stats.py and
compare.py) at their boundaries, on inputs whose bootstrap distribution is known by hand.

Hand derivations used below:
- a run whose steps are all equal has every bootstrap mean equal to that value;
- a run of two steps [0, 10] has bootstrap means 0, 5, 10 with probabilities 1/4, 1/2, 1/4;
- two runs of constant steps 1 and 3, runs resampled: side means 1, 2, 3 with 1/4, 1/2, 1/4.
With 2000 replicates each outcome of probability >= 1/4 holds far more than 2.5% of them.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tb_plugin.analysis.compare.compare import MIN_SHARED_OPERATORS, compare, incomparable
from tb_plugin.analysis.compare.stats import (
    IMPROVED,
    NOT_COMPARABLE,
    OVER_RUNS,
    OVER_STEPS,
    REGRESSED,
    UNCHANGED,
    Interval,
    bootstrap_deltas,
    gate_fails,
    quantile_of,
    verdict,
)
from tb_plugin.analysis.compare.summary import user_frames


def col(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=float)[:, None]


def test_constant_steps_give_a_point_interval() -> None:
    (iv,) = bootstrap_deltas([col(10, 10, 10)], [col(12, 12, 12, 12)])
    assert (iv.base, iv.exp, iv.delta, iv.low, iv.high) == (10, 12, 2, 2, 2)
    assert iv.over == OVER_STEPS
    assert iv.relative == pytest.approx(0.2)


def test_percentile_interval_follows_the_confidence() -> None:
    # exp means: 0 (1/4), 5 (1/2), 10 (1/4); base constant 4
    (wide,) = bootstrap_deltas([col(4, 4)], [col(0, 10)], confidence=0.95)
    assert (wide.delta, wide.low, wide.high) == (1, -4, 6)
    # at 40% the quantiles 0.30 and 0.70 both fall on the middle outcome 5
    (narrow,) = bootstrap_deltas([col(4, 4)], [col(0, 10)], confidence=0.40)
    assert (narrow.low, narrow.high) == (1, 1)


def test_runs_are_resampled_when_both_sides_have_two_runs() -> None:
    base = [col(1, 1), col(3, 3)]
    (iv,) = bootstrap_deltas(base, [col(2, 2), col(2, 2)])
    assert iv.over == OVER_RUNS
    assert (iv.delta, iv.low, iv.high) == (0, -1, 1)
    # one experiment run: steps only, and each base run's constant steps never move
    (steps_only,) = bootstrap_deltas(base, [col(2, 2)])
    assert steps_only.over == OVER_STEPS
    assert (steps_only.low, steps_only.high) == (0, 0)


def test_runs_weigh_the_same_whatever_their_step_count() -> None:
    (iv,) = bootstrap_deltas([col(1), col(3, 3, 3, 3)], [col(2), col(2)])
    assert iv.base == 2  # (1 + 3) / 2, not the pooled 13 / 5


def test_metrics_are_columns_resampled_together() -> None:
    base = [np.asarray([[1.0, 10.0], [1.0, 10.0]])]
    out = bootstrap_deltas(base, [np.asarray([[2.0, 10.0], [2.0, 10.0]])])
    assert [(iv.delta, iv.low, iv.high) for iv in out] == [(1, 1, 1), (0, 0, 0)]


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5])
def test_confidence_outside_the_open_unit_interval_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_deltas([col(1)], [col(1)], confidence=confidence)


def test_a_side_without_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="baseline has no steps"):
        bootstrap_deltas([np.zeros((0, 1))], [col(1)])
    with pytest.raises(ValueError, match="experiment has no steps"):
        bootstrap_deltas([col(1)], [])


def _iv(low: float, high: float, base: float = 100.0) -> Interval:
    return Interval(base, base + (low + high) / 2, (low + high) / 2, low, high, 0.95,
                    OVER_STEPS)


def test_verdict_is_strict_at_the_floor_on_both_sides() -> None:
    assert verdict(_iv(2.0, 5.0), 2.0) == UNCHANGED  # low == floor
    assert verdict(_iv(2.0001, 5.0), 2.0) == REGRESSED
    assert verdict(_iv(-5.0, -2.0), 2.0) == UNCHANGED  # high == -floor
    assert verdict(_iv(-5.0, -2.0001), 2.0) == IMPROVED
    assert verdict(_iv(-1.0, 1.0), 0.0) == UNCHANGED
    assert verdict(_iv(0.0001, 1.0), 0.0) == REGRESSED
    with pytest.raises(ValueError):
        verdict(_iv(0, 1), -0.1)


def test_gate_is_strict_at_the_threshold() -> None:
    assert not gate_fails(_iv(3.0, 9.0), 0.03)  # low == 3% of 100
    assert gate_fails(_iv(3.0001, 9.0), 0.03)
    assert not gate_fails(_iv(-1.0, 9.0), 0.0)
    assert gate_fails(_iv(0.5, 9.0, base=0.0), 0.03)  # absent from the baseline
    with pytest.raises(ValueError):
        gate_fails(_iv(0, 1), -0.01)


# -- compare(): floors, ranking, not-comparable reasons ---------------------------------------


def summary(total: float, ops: dict[str, float], steps: int = 3, device: str = "CPU",
            modules: tuple[str, ...] = ("nn.Module: Net_0",),
            structure: tuple[str, ...] = ("module:nn.Module: Net_0",)) -> dict:
    metrics = {"step:Total": [total] * steps}
    metrics.update({f"operator:{k}": [v] * steps for k, v in ops.items()})
    return {"version": 1, "steps": [str(i) for i in range(steps)], "from_markers": True,
            "device": device, "modules": list(modules), "operators": sorted(ops),
            "structure": list(structure), "metrics": metrics,
            "sources": {"aten::mm": ["train.py(12): forward"]}}


def test_floor_is_min_change_of_the_base_step_time_and_strict() -> None:
    base = [[summary(100.0, {"aten::mm": 10.0})]]
    at = compare(base, [[summary(102.0, {"aten::mm": 12.0})]], min_change=0.02)
    assert at["floor_us"] == 2.0
    assert at["verdict"] == UNCHANGED and at["top_regressed"] == []
    above = compare(base, [[summary(102.5, {"aten::mm": 12.5})]], min_change=0.02)
    assert above["verdict"] == REGRESSED
    assert [r["name"] for r in above["top_regressed"]] == ["aten::mm"]
    assert above["top_regressed"][0]["source"] == ["train.py(12): forward"]
    below = compare(base, [[summary(97.5, {"aten::mm": 7.5})]], min_change=0.02)
    assert below["verdict"] == IMPROVED


def test_top_regressed_ranks_by_delta_and_a_new_operator_counts() -> None:
    base = [[summary(100.0, {"aten::mm": 10.0, "aten::add": 5.0})]]
    exp = [[summary(120.0, {"aten::mm": 13.0, "aten::add": 20.0, "aten::relu": 4.0})]]
    out = compare(base, exp, min_change=0.01)
    assert [(r["name"], r["delta_us"]) for r in out["top_regressed"]] == [
        ("aten::add", 15.0), ("aten::relu", 4.0), ("aten::mm", 3.0)]
    relu = next(r for r in out["metrics"] if r["metric"] == "operator:aten::relu")
    assert relu["base_us"] == 0.0 and relu["relative"] is None
    assert out["metrics"][0]["metric"] == "step:Total"
    assert out["note"] is not None and out["interval_over"] == OVER_STEPS


def test_identical_sides_are_unchanged() -> None:
    runs = [[summary(100.0, {"aten::mm": 10.0})], [summary(104.0, {"aten::mm": 11.0})]]
    out = compare(runs, copy.deepcopy(runs))
    assert out["verdict"] == UNCHANGED and out["interval_over"] == OVER_RUNS
    assert out["note"] is None
    assert all(r["verdict"] == UNCHANGED for r in out["metrics"])


def test_different_device_is_not_comparable() -> None:
    out = compare([[summary(1, {"a": 1})]], [[summary(1, {"a": 1}, device="NVIDIA H100")]])
    assert out["verdict"] == NOT_COMPARABLE
    assert out["reasons"] == ["different device: CPU (baseline) vs NVIDIA H100 (experiment)"]
    assert out["metrics"] == [] and out["headline"] is None


def test_different_modules_name_the_difference() -> None:
    other = summary(1, {"a": 1}, modules=("nn.Module: Net_0", "nn.Module: Extra_0"))
    assert incomparable([[summary(1, {"a": 1})]], [[other]]) == [
        "different model: modules only in the experiment: nn.Module: Extra_0"]


def test_operator_overlap_decides_without_modules_at_its_boundary() -> None:
    assert MIN_SHARED_OPERATORS == 0.5
    def side(*ops: str) -> list:
        return [[summary(1, dict.fromkeys(ops, 1.0), modules=())]]
    # 2 of 4 names shared: exactly 50%, comparable
    assert incomparable(side("a", "b", "c"), side("a", "b", "d")) == []
    # 2 of 5 names shared: 40%
    assert incomparable(side("a", "b", "c"), side("a", "b", "d", "e")) == [
        "different model: 40% of the operator names in common (at least 50% needed)"]


def test_different_step_structure_and_missing_steps_are_named() -> None:
    other = summary(1, {"a": 1}, structure=("module:nn.Module: Net_0", "optimizer:SGD"))
    assert incomparable([[summary(1, {"a": 1})]], [[other]]) == [
        "different step structure: a baseline step runs module:nn.Module: Net_0; an "
        "experiment step runs module:nn.Module: Net_0 > optimizer:SGD"]
    empty = summary(1, {"a": 1}, steps=0)
    assert incomparable([[empty]], [[summary(1, {"a": 1})]]) == ["the baseline has no steps"]


def test_user_frames_skip_torch_files() -> None:
    stack = ("torch/nn/modules/linear.py(130): forward;torch/nn/modules/module.py(1782): "
             "_call_impl;model.py(84): forward;<built-in method x>;train.py(107): train;"
             "train.py(123): run;train.py(223): main")
    assert user_frames(stack) == ["model.py(84): forward", "train.py(107): train",
                                  "train.py(123): run"]
    assert user_frames("torch/a.py(1): f;torch/b.py(2): g") == ["torch/a.py(1): f",
                                                               "torch/b.py(2): g"]


def test_a_quantile_statistic_resamples_the_run_quantile() -> None:
    """Median of 3 draws from [0, 1, 100]: 0 when at least two draws are 0 (7/27), 100 alike
    (7/27), else 1 (13/27); the mean of the same steps would be pulled by the 100."""
    (wide,) = bootstrap_deltas([col(0, 0, 0)], [col(0, 1, 100)], statistic="median")
    assert (wide.exp, wide.low, wide.high) == (1, 0, 100)
    (narrow,) = bootstrap_deltas([col(0, 0, 0)], [col(0, 1, 100)], statistic="p50",
                                 confidence=0.40)
    assert (narrow.low, narrow.high) == (1, 1)  # 7/27 < 0.30 and 20/27 > 0.70
    (low,) = bootstrap_deltas([col(0, 0, 0)], [col(0, 10, 20, 30, 40)], statistic="p25")
    assert low.exp == 10  # numpy's linear quantile: position 0.25 * 4 = 1


@pytest.mark.parametrize("statistic", ["p0", "p100", "max", "p", "pxx", "median2"])
def test_unknown_statistics_are_refused(statistic: str) -> None:
    with pytest.raises(ValueError, match="unknown statistic"):
        bootstrap_deltas([col(1)], [col(1)], statistic=statistic)


@pytest.mark.parametrize("statistic, expected", [("p1", 0.01), ("p99", 0.99), ("median", 0.5),
                                                 ("mean", None)])
def test_statistics_just_inside_the_bounds_are_taken(statistic: str, expected) -> None:
    from_stats = quantile_of(statistic)
    assert from_stats == expected


def test_min_change_must_not_be_negative() -> None:
    base = [[summary(100.0, {"aten::mm": 10.0})]]
    with pytest.raises(ValueError, match="min_change must be >= 0, got -0.01"):
        compare(base, base, min_change=-0.01)
    zero = compare(base, copy.deepcopy(base), min_change=0.0)
    assert zero["floor_us"] == 0.0 and zero["verdict"] == UNCHANGED  # a point interval at 0


def test_module_reasons_list_three_names_then_count_the_rest() -> None:
    def side(*names: str) -> list:
        return [[summary(1, {"a": 1}, modules=names)]]

    assert incomparable(side("A", "B", "C", "D", "E"), side("A", "X", "Y", "Z")) == [
        "different model: modules only in the baseline: B, C, D (and 1 more); modules only in "
        "the experiment: X, Y, Z"]
    # modules on one side only still differ
    assert incomparable(side(), side("A")) == [
        "different model: modules only in the experiment: A"]


def test_missing_structure_and_experiment_steps_are_named() -> None:
    none = summary(1, {"a": 1}, structure=())
    assert incomparable([[none]], [[summary(1, {"a": 1})]]) == [
        "different step structure: a baseline step runs (none); an experiment step runs "
        "module:nn.Module: Net_0"]
    empty = summary(1, {"a": 1}, steps=0)
    assert incomparable([[summary(1, {"a": 1})]], [[empty]]) == [
        "the experiment has no steps"]


def test_files_of_a_run_pool_their_steps_and_lack_metrics_as_zero() -> None:
    # one baseline run of two files (3 steps each; the second has no aten::add) and a file
    # without steps; the experiment: one file of 2 steps
    base = [[summary(100.0, {"aten::mm": 10.0, "aten::add": 4.0}),
             summary(100.0, {"aten::mm": 20.0}), summary(100.0, {"aten::mm": 99.0}, steps=0)]]
    exp = [[summary(100.0, {"aten::mm": 15.0, "aten::add": 2.0}, steps=2)]]
    out = compare(base, exp)
    assert out["base"] == {"runs": 1, "files": 3, "steps": 6, "device": "CPU"}
    assert out["exp"] == {"runs": 1, "files": 1, "steps": 2, "device": "CPU"}
    rows = {r["metric"]: r for r in out["metrics"]}
    assert rows["operator:aten::mm"]["base_us"] == 15.0  # (3 x 10 + 3 x 20) / 6
    assert rows["operator:aten::add"]["base_us"] == 2.0  # (3 x 4 + 3 x 0) / 6
    assert rows["operator:aten::add"]["exp_us"] == 2.0
    assert [r["metric"] for r in out["metrics"]] == [
        "step:Total", "operator:aten::add", "operator:aten::mm"]
