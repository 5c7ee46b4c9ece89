"""Memory curve helpers (tb_plugin/analysis/memory/curves.py) against brute-force loops:
the down-sampling's per-bin minimum and maximum, the window's bound points, the step form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tb_plugin.analysis.memory.curves import downsample, step_points, window_points


def _downsample_oracle(t: list[float], y: list[float], max_points: int) -> list[int]:
    n = len(t)
    if n <= max_points:
        return list(range(n))
    bins = max(1, (max_points - 2) // 2)
    span = t[-1] - t[0]
    members: dict[int, list[int]] = {}
    for i in range(1, n - 1):
        position = (t[i] - t[0]) / span if span > 0 else i / n
        members.setdefault(min(max(int(position * bins), 0), bins - 1), []).append(i)
    keep = {0, n - 1}
    for idx in members.values():
        low = min(y[i] for i in idx)
        high = max(y[i] for i in idx)
        keep.add(min(i for i in idx if y[i] == low))   # the first of equal minima
        keep.add(max(i for i in idx if y[i] == high))  # the last of equal maxima
    return sorted(keep)


@pytest.mark.parametrize("seed", range(10))
def test_downsample_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 120))
    t = np.sort(rng.integers(0, 50, size=n)).astype(np.float64)  # repeated times too
    y = rng.integers(0, 5, size=n).astype(np.float64)  # many equal values
    for max_points in (1, 2, 3, 4, 5, 6, 10, n - 1, n, n + 1):
        keep = downsample(t, y, max_points)
        assert keep.tolist() == _downsample_oracle(t.tolist(), y.tolist(), max_points)
        if n > max_points:
            assert len(keep) <= max(max_points, 4)  # 2 ends + 2 per bin, at least one bin


def test_downsample_with_all_times_equal_bins_by_position():
    t = np.zeros(10)
    y = np.array([5, 1, 9, 2, 8, 3, 7, 4, 6, 0], dtype=np.float64)
    # bins = (6 - 2) // 2 = 2: inner points 1..8 by i / n: 1-4 in bin 0, 5-8 in bin 1
    assert downsample(t, y, 6).tolist() == [0, 1, 2, 5, 6, 9]


def _window_oracle(t, values, start, end):
    inside = [i for i, ti in enumerate(t) if (start is None or ti >= start)
              and (end is None or ti <= end)]
    t_out = [t[i] for i in inside]
    v_out = [[v[i] for i in inside] for v in values]
    before = [i for i, ti in enumerate(t) if start is not None and ti < start]
    if before and (not t_out or t_out[0] > start):
        t_out.insert(0, start)
        for v, w in zip(values, v_out):
            w.insert(0, v[before[-1]])
    after = [i for i, ti in enumerate(t) if end is not None and ti > end]
    if after and t_out and t_out[-1] < end:
        t_out.append(end)
        for w in v_out:
            w.append(w[-1])
    return t_out, v_out


@pytest.mark.parametrize("seed", range(6))
def test_window_points_against_a_loop(seed):
    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(0, 15))
    t = np.sort(rng.integers(0, 20, size=n)).astype(np.float64)
    values = [rng.integers(0, 100, size=n).astype(np.float64) for _ in range(2)]
    bounds = [None, -1.0, 0.0, 3.0, 7.5, 10.0, 19.0, 25.0]
    for start in bounds:
        for end in bounds:
            if start is not None and end is not None and end < start:
                continue
            t_out, v_out = window_points(t, values, start, end)
            want_t, want_v = _window_oracle(t.tolist(), [v.tolist() for v in values], start,
                                            end)
            assert t_out.tolist() == want_t, (start, end)
            assert [v.tolist() for v in v_out] == want_v, (start, end)


def test_window_points_by_hand():
    t = np.array([10.0, 20.0, 30.0])
    v = [np.array([1.0, 2.0, 3.0])]
    # the value in force at 15 is 1; at 25 the curve ends on a point carrying 2
    t_out, (v_out,) = window_points(t, v, 15.0, 25.0)
    assert (t_out.tolist(), v_out.tolist()) == ([15.0, 20.0, 25.0], [1.0, 2.0, 2.0])
    # bounds on points: no extra point
    t_out, (v_out,) = window_points(t, v, 10.0, 30.0)
    assert (t_out.tolist(), v_out.tolist()) == ([10.0, 20.0, 30.0], [1.0, 2.0, 3.0])
    # a window between two points: a point at each bound carrying the value in force
    t_out, (v_out,) = window_points(t, v, 21.0, 29.0)
    assert (t_out.tolist(), v_out.tolist()) == ([21.0, 29.0], [2.0, 2.0])
    # before the first point nothing is in force
    t_out, (v_out,) = window_points(t, v, 0.0, 5.0)
    assert (t_out.tolist(), v_out.tolist()) == ([], [])


def test_step_points():
    t, (a, b) = step_points(np.array([1.0, 2.0, 4.0]), [np.array([5.0, 6.0, 7.0]),
                                                       np.array([0.0, math.inf, 1.0])])
    assert t.tolist() == [1.0, 2.0, 2.0, 4.0, 4.0]
    assert a.tolist() == [5.0, 5.0, 6.0, 6.0, 7.0]
    assert b.tolist() == [0.0, 0.0, math.inf, math.inf, 1.0]
    t, (a,) = step_points(np.array([3.0]), [np.array([9.0])])
    assert (t.tolist(), a.tolist()) == ([3.0], [9.0])
