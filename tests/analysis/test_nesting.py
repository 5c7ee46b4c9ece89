"""The interval-nesting kernel (tb_plugin/analysis/nesting.py) against plain-loop references."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.analysis.nesting import _parents, _parents_by_key, dense_ranks, nest


def _stack_nest(group, start, end):
    """The reference's stack algorithm, clamping instead of dropping (test oracle): returns
    parent, depth and clamped end per input index, and the number of clamped ends."""
    order = sorted(range(len(start)), key=lambda i: (group[i], start[i], -end[i], i))
    end = end.astype(float).copy()
    parent, depth, stack, current, clamped = {}, {}, [], None, 0
    for i in order:
        if group[i] != current:
            stack, current = [], group[i]
        while stack and not start[i] < end[stack[-1]]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        if stack and end[i] > end[stack[-1]]:
            end[i] = end[stack[-1]]
            clamped += 1
        depth[i] = len(stack)
        stack.append(i)
    return parent, depth, end, clamped


def _stack_sweep(start, end, track):
    """The timeline's phrasing of the same sweep, on events already in pre-order: a stack of
    open ends; zero-length events are never pushed (they contain nothing)."""
    end = end.copy()
    depth = np.zeros(start.size, dtype=np.int64)
    clamped = np.zeros(start.size, dtype=bool)
    stack: list[int] = []
    for i in range(start.size):
        if i and track[i] != track[i - 1]:
            stack = []
        while stack and stack[-1] <= start[i]:
            stack.pop()
        if stack and end[i] > stack[-1]:
            end[i], clamped[i] = stack[-1], True
        depth[i] = len(stack)
        if end[i] > start[i]:
            stack.append(int(end[i]))
    return depth, end, clamped


def _check_against_stack(group, start, end):
    got = nest(group, start, end)
    want_parent, want_depth, want_end, want_clamped = _stack_nest(group, start, end)
    n = len(start)
    order = got.order
    assert {int(order[k]): int(order[got.parent[k]]) if got.parent[k] >= 0 else -1
            for k in range(n)} == want_parent
    assert {int(order[k]): int(got.depth[k]) for k in range(n)} == want_depth
    np.testing.assert_array_equal(got.end, want_end)
    assert got.clamped == want_clamped
    return got


def _random_intervals(rng, n):
    """Intervals with many exact ties, zero-length events, equal ends and deep chains."""
    group = rng.integers(0, 3, n)
    start = rng.integers(0, 30, n).astype(float)
    length = rng.choice([0.0, 0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 20.0, 60.0], n)
    end = start + length
    same_end = rng.random(n) < 0.2  # equal ends with an earlier interval
    end[same_end] = np.maximum(start[same_end], rng.choice(end, same_end.sum()))
    dup = rng.random(n) < 0.15  # exact duplicates of another interval
    src = rng.integers(0, n, n)
    group[dup], start[dup], end[dup] = group[src[dup]], start[src[dup]], end[src[dup]]
    return group, start, end


@pytest.mark.parametrize("seed", range(4))
def test_nest_matches_the_stack_algorithm(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(1, 60))
        group = rng.integers(0, 3, n)
        start = np.round(rng.uniform(0, 40, n), 1)
        end = start + np.round(rng.exponential(6, n), 1) * (rng.random(n) > 0.15)
        _check_against_stack(group, start, end)


@pytest.mark.parametrize("seed", range(4))
def test_nest_ties_zero_length_equal_ends_against_the_loop(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(200):
        _check_against_stack(*_random_intervals(rng, int(rng.integers(1, 80))))


def test_nest_deep_nesting_with_overhangs():
    """A 400-deep chain of strictly nested intervals, every tenth overhanging its parent."""
    n = 400
    start = np.arange(n, dtype=float)
    end = 2.0 * n - start
    end[::10] += 1.5  # outlasts its parent: clamped
    got = _check_against_stack(np.zeros(n, dtype=np.int64), start, end)
    np.testing.assert_array_equal(got.depth, np.arange(n))
    assert got.clamped == n // 10 - 1  # the outermost has no parent to be clamped into


@pytest.mark.parametrize("seed", range(3))
def test_nest_equals_the_timeline_sweep_on_integer_ticks(seed):
    """The timeline's pre-sorted integer ticks: pre-order kept, depths and ends as its sweep."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        track = np.sort(rng.integers(0, 3, n))
        start = rng.integers(0, 200, n)
        end = start + rng.choice([0, 1, 2, 5, 10, 40, 120], n)
        order = np.lexsort((-end, track * 400 + start))
        start, end, track = start[order], end[order], track[order]
        got = nest(track, start, end)
        ref_depth, ref_end, ref_clamped = _stack_sweep(start, end, track)
        np.testing.assert_array_equal(got.order, np.arange(n))
        np.testing.assert_array_equal(got.depth, ref_depth)
        np.testing.assert_array_equal(got.end, ref_end)
        assert got.clamped == int(ref_clamped.sum())


def test_nest_rules_for_ties_and_zero_length():
    group = np.zeros(7, dtype=np.int64)
    #                 A    A'   B    B0   B0'  C    D
    start = np.array([0.0, 0.0, 2.0, 3.0, 3.0, 5.0, 10.0])
    end = np.array([10.0, 10.0, 5.0, 3.0, 3.0, 5.0, 12.0])
    got = nest(group, start, end)
    parent = {int(got.order[k]): int(got.order[p]) if p >= 0 else -1
              for k, p in enumerate(got.parent)}
    assert parent[1] == 0  # identical intervals nest: the first is the parent
    assert parent[2] == 1  # inside A'
    assert parent[3] == 2 and parent[4] == 2  # instants are leaves, even of equal instants
    assert parent[5] == 1  # the instant at B's end is after B (half-open)
    assert parent[6] == -1  # starts where A ends: a sibling
    assert got.clamped == 0


def test_nest_long_overlap_chain_falls_back_exactly():
    n = 300
    start = np.arange(n, dtype=float)
    end = start + 10.5
    got = _check_against_stack(np.zeros(n, dtype=np.int64), start, end)
    assert got.clamped > 0


def test_nest_empty():
    got = nest(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))
    assert (len(got.order), len(got.parent), len(got.depth), got.clamped) == (0, 0, 0, 0)


def test_dense_ranks_equal_numpy_unique_inverse():
    rng = np.random.default_rng(7)
    values = np.round(rng.random(5000) * 100, 1)
    values[rng.integers(0, 5000, 40)] = np.nan
    ranks, distinct = dense_ranks(values)
    unique, inverse = np.unique(values, return_inverse=True)
    assert distinct == len(unique)
    np.testing.assert_array_equal(ranks, inverse)
    assert dense_ranks(np.array([]))[1] == 0


@pytest.mark.parametrize("seed", range(3))
def test_parents_per_level_equal_the_key_search(seed):
    """`_parents` (one searchsorted per level) gives exactly what a search over (depth,
    position) keys gives, also for the gapped depth sequences of non-laminar clamping rounds."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 80))
        depth = np.maximum(np.cumsum(rng.integers(-2, 3, n)), 0)  # steps up to 2: gaps
        depth[0] = 0
        want = np.full(n, -1)
        inner = np.flatnonzero(depth > 0)
        want[inner] = _parents_by_key(depth, inner)
        np.testing.assert_array_equal(_parents(depth), want)
