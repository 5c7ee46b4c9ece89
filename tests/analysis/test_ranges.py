import math

import numpy as np
import pytest

from tb_plugin.analysis import ranges as rg


def from_pairs(pairs):
    """[(start, end), ...] -> (starts, ends)."""
    array = np.asarray(list(pairs), dtype=np.float64).reshape(-1, 2)
    return array[:, 0].copy(), array[:, 1].copy()


def to_pairs(ranges):
    return [(float(s), float(e)) for s, e in zip(*ranges)]

A = from_pairs([(1.1, 2.2), (3.3, 4.4), (5.5, 6.6)])
B = from_pairs([(0, 0.1), (1.0, 1.4), (1.5, 1.6), (1.9, 3.4), (4.3, 4.6)])


def _approx_pairs(actual, expected):
    assert len(actual) == len(expected), actual
    for (s, e), (xs, xe) in zip(actual, expected):
        assert s == pytest.approx(xs) and e == pytest.approx(xe)


def test_merge_ranges_spec_vector():
    merged = rg.merge(*from_pairs(
        [(1.1, 2.2), (1.5, 2.3), (3.3, 3.9), (3.5, 3.6), (3.7, 3.8), (4.1, 4.2)]))
    _approx_pairs(to_pairs(merged), [(1.1, 2.3), (3.3, 3.9), (4.1, 4.2)])


def test_subtract_ranges_spec_vector():
    _approx_pairs(to_pairs(rg.subtract(A, B)),
                  [(1.4, 1.5), (1.6, 1.9), (3.4, 4.3), (5.5, 6.6)])


def test_intersection_ranges_spec_vector():
    _approx_pairs(to_pairs(rg.intersect(A, B)),
                  [(1.1, 1.4), (1.5, 1.6), (1.9, 2.2), (3.3, 3.4), (4.3, 4.4)])


def test_ranges_sum_spec_vector():
    assert math.isclose(rg.total_length(A), 3.3)


def test_merge_unsorted_touching_and_empty():
    merged = rg.merge(np.array([5.0, 0.0, 2.0, 7.0, 3.0]), np.array([6.0, 2.0, 3.0, 7.0, 4.0]))
    assert to_pairs(merged) == [(0.0, 4.0), (5.0, 6.0)]  # [7,7) is empty and dropped
    assert to_pairs(rg.merge(np.array([]), np.array([]))) == []


def test_operations_on_empty_lists():
    empty = rg.empty()
    assert to_pairs(rg.intersect(A, empty)) == []
    assert to_pairs(rg.subtract(empty, A)) == []
    assert to_pairs(rg.subtract(A, empty)) == to_pairs(A)


def test_unmerged_inputs_are_merged_first():
    overlapping = from_pairs([(0, 10), (5, 20)])
    assert to_pairs(rg.intersect(overlapping, from_pairs([(8, 12)]))) == [(8.0, 12.0)]
    assert to_pairs(rg.subtract(overlapping, from_pairs([(8, 12)]))) == [
        (0.0, 8.0), (12.0, 20.0)]


def test_length_in_windows_overlapping_and_outside():
    busy = from_pairs([(10, 20), (30, 40)])
    lengths = rg.length_in_windows(busy, np.array([0, 15, 25, 35, 50, 0]),
                                   np.array([100, 35, 28, 36, 60, 5]))
    assert lengths.tolist() == [20.0, 10.0, 0.0, 1.0, 0.0, 0.0]


def _brute(pairs_a, pairs_b, op):
    """Pointwise reference on a fine integer grid."""
    grid = np.arange(0, 260)
    def covered(pairs):
        return np.any([(grid >= s) & (grid < e) for s, e in pairs] or [np.zeros_like(grid,
                                                                                     bool)], 0)
    return int(np.sum(op(covered(pairs_a), covered(pairs_b))))


@pytest.mark.parametrize("seed", range(20))
def test_random_against_pointwise_reference(seed):
    rng = np.random.default_rng(seed)
    def random_pairs(n):
        starts = rng.integers(0, 190, n)
        return [(int(s), int(s + rng.integers(0, 15))) for s in starts]
    pairs_a, pairs_b = random_pairs(rng.integers(0, 30)), random_pairs(rng.integers(0, 30))
    a = rg.merge(*from_pairs(pairs_a))
    b = rg.merge(*from_pairs(pairs_b))
    assert rg.is_merged(a) and rg.is_merged(b)
    assert rg.total_length(a) == _brute(pairs_a, [], lambda x, y: x)
    assert rg.total_length(rg.intersect(a, b)) == _brute(pairs_a, pairs_b, np.logical_and)
    assert rg.total_length(rg.subtract(a, b)) == _brute(
        pairs_a, pairs_b, lambda x, y: x & ~y)
    windows = np.sort(rng.integers(0, 200, (10, 2)), axis=1)
    expected = [_brute(pairs_a, [(w0, w1)], np.logical_and) for w0, w1 in windows]
    assert rg.length_in_windows(a, windows[:, 0], windows[:, 1]).tolist() == expected


def test_contains_is_half_open_on_both_sides():
    ranges = (np.array([30.0, 10.0]), np.array([40.0, 20.0]))  # unmerged input is merged first
    points = np.array([9.999, 10.0, 15.0, 19.999, 20.0, 25.0, 30.0, 40.0])
    assert rg.contains(ranges, points).tolist() == [False, True, True, True, False, False,
                                                    True, False]
    assert rg.contains(rg.empty(), points).tolist() == [False] * len(points)
