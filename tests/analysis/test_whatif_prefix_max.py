"""The replay's prefix-maximum tree (`whatif/simulate._PrefixMax`) against brute force: after
any sequence of sets, `get(i)` is the maximum of the values set at positions below i (-inf when
none), including 0 and n."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.analysis.whatif.simulate import _PrefixMax


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(-50, 50)), max_size=60))))
def test_prefix_max_is_the_brute_force_maximum(case) -> None:
    n, sets = case
    tree = _PrefixMax(n)
    values: dict[int, float] = {}
    for position, value in sets:
        tree.set(position, float(value))
        values[position] = max(values.get(position, -math.inf), float(value))
        for i in range(n + 1):
            assert tree.get(i) == max((v for p, v in values.items() if p < i), default=-math.inf)


def test_prefix_max_examples() -> None:
    tree = _PrefixMax(4)
    assert [tree.get(i) for i in range(5)] == [-math.inf] * 5
    tree.set(2, 5.0)
    tree.set(0, -1.0)
    assert [tree.get(i) for i in range(5)] == [-math.inf, -1.0, -1.0, 5.0, 5.0]
    tree.set(3, 2.0)  # smaller than what is before it: nothing changes past it
    tree.set(1, 9.0)
    assert [tree.get(i) for i in range(5)] == [-math.inf, -1.0, 9.0, 9.0, 9.0]
