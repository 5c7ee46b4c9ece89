"""The statistics of `torch-prof compare`: a hierarchical bootstrap of the per-step mean, and
the verdict rules.

Unit of resampling. Steps of one run share that run's conditions (host load, clocks, data
order), so they are not independent of the run: resampling steps alone makes an interval that
ignores run-to-run variation, and two runs of identical code would differ "significantly".
A side is therefore a list of runs, each an array of per-step values (the steps of all its
spans and ranks pooled); one bootstrap replicate draws the runs with replacement, then each
drawn run's steps with replacement, and averages the run means (each run weighs the same).
With one run per side only the steps are resampled: `Interval.over` says which
("runs and steps", or "steps": run-to-run variation is then not in the interval).

The statistic of a run is the mean of its steps (`statistic="mean"`, the default: what a
step costs on average, stalls included), or a quantile of them (`"median"`, `"p20"`, ...):
on a shared host where a share of the steps is preempted by other jobs, a low quantile
measures the code rather than the neighbours (bench/regression_validate.py). The interval is
the percentile interval of the replicate deltas (experiment minus baseline statistic) at
`confidence` (two-sided). The resampling is seeded, so a comparison is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

REGRESSED, IMPROVED, UNCHANGED, NOT_COMPARABLE = (
    "regressed", "improved", "unchanged", "not comparable")
OVER_RUNS, OVER_STEPS = "runs and steps", "steps"
DEFAULT_REPLICATES = 2000
DEFAULT_SEED = 0
MEAN = "mean"
_CHUNK = 4_000_000  # gathered values per quantile block (bounded memory)


def quantile_of(statistic: str) -> Optional[float]:
    """None for "mean"; the quantile in (0, 1) for "median" or "pNN" (0 < NN < 100);
    ValueError otherwise."""
    if statistic == MEAN:
        return None
    if statistic == "median":
        return 0.5
    try:
        value = float(statistic[1:]) if statistic.startswith("p") else -1.0
    except ValueError:
        value = -1.0
    if not 0.0 < value < 100.0:
        raise ValueError(f"unknown statistic {statistic!r}: mean, median or pNN (0 < NN < 100)")
    return value / 100.0


def _run_statistic(values: np.ndarray, replicates: int, rng: np.random.Generator,
                   q: Optional[float]) -> tuple[np.ndarray, np.ndarray]:
    """(statistic of the run (m,), of `replicates` resamples of its steps (replicates, m))."""
    n = len(values)
    if q is None:
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=replicates)
        return values.mean(axis=0), counts @ values / n
    picks = rng.integers(n, size=(replicates, n))
    out = np.empty((replicates, values.shape[1]))
    width = max(1, _CHUNK // max(1, replicates * n))
    for lo in range(0, values.shape[1], width):
        out[:, lo:lo + width] = np.quantile(values[:, lo:lo + width][picks], q, axis=1)
    return np.quantile(values, q, axis=0), out


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval of the delta (exp - base) of one metric's per-step mean."""

    base: float  # point estimate: mean of the run means, us per step
    exp: float
    delta: float  # exp - base
    low: float  # the interval's bounds on delta
    high: float
    confidence: float
    over: str  # OVER_RUNS or OVER_STEPS

    @property
    def relative(self) -> Optional[float]:
        """delta / base (None when the baseline is 0)."""
        return self.delta / self.base if self.base != 0 else None


def side_replicates(runs: Sequence[np.ndarray], replicates: int, rng: np.random.Generator,
                    hierarchical: bool, statistic: str = MEAN
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(point estimates (m,), replicates (replicates, m)) of one side: the mean over runs of
    each run's statistic.

    `runs`: per run, a (steps, m) array of m metrics per step. Every metric is resampled with
    the same draws, so metrics of one replicate stay consistent with each other."""
    q = quantile_of(statistic)
    parts = [_run_statistic(values, replicates, rng, q) for values in runs]
    point = np.stack([p for p, _ in parts]).mean(axis=0)
    stacked = np.stack([r for _, r in parts])  # (R, replicates, m)
    if not hierarchical:
        return point, stacked.mean(axis=0)
    picks = rng.integers(len(runs), size=(replicates, len(runs)))  # runs with replacement
    drawn = stacked[picks, np.arange(replicates)[:, None], :]  # (replicates, R, m)
    return point, drawn.mean(axis=1)


def bootstrap_deltas(base: Sequence[np.ndarray], exp: Sequence[np.ndarray], *,
                     confidence: float = 0.95, replicates: int = DEFAULT_REPLICATES,
                     seed: int = DEFAULT_SEED, statistic: str = MEAN) -> list[Interval]:
    """One `Interval` per metric (column) of the runs of both sides.

    Runs are resampled too when both sides have at least two runs; else steps only.
    Raises ValueError for a confidence outside (0, 1), an unknown statistic, a side without
    runs or a run without steps."""
    quantile_of(statistic)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    for name, side in (("baseline", base), ("experiment", exp)):
        if not side or any(len(r) == 0 for r in side):
            raise ValueError(f"the {name} has no steps to compare")
    rng = np.random.default_rng(seed)
    hierarchical = len(base) >= 2 and len(exp) >= 2
    b_point, b_reps = side_replicates(base, replicates, rng, hierarchical, statistic)
    e_point, e_reps = side_replicates(exp, replicates, rng, hierarchical, statistic)
    deltas = e_reps - b_reps
    tail = (1.0 - confidence) / 2.0
    low = np.quantile(deltas, tail, axis=0)
    high = np.quantile(deltas, 1.0 - tail, axis=0)
    over = OVER_RUNS if hierarchical else OVER_STEPS
    return [Interval(float(b), float(e), float(e - b), float(lo), float(hi), confidence, over)
            for b, e, lo, hi in zip(b_point, e_point, low, high)]


def verdict(interval: Interval, floor_us: float) -> str:
    """regressed when the whole interval lies above +floor_us (strictly), improved when it
    lies below -floor_us (strictly), else unchanged. `floor_us` >= 0 is the smallest change
    that matters (compare: `min_change` of the baseline step time)."""
    if floor_us < 0:
        raise ValueError(f"the floor must be >= 0, got {floor_us}")
    if interval.low > floor_us:
        return REGRESSED
    if interval.high < -floor_us:
        return IMPROVED
    return UNCHANGED


def gate_fails(interval: Interval, threshold: float) -> bool:
    """The CI gate: True when the metric regressed by more than `threshold` (a fraction of
    its baseline, 0.03 for 3%) with the interval's confidence, i.e. the interval's lower
    bound is strictly above threshold * baseline. A metric absent from the baseline (0)
    fails as soon as its lower bound is above 0."""
    if threshold < 0:
        raise ValueError(f"the gate threshold must be >= 0, got {threshold}")
    return interval.low > threshold * interval.base
