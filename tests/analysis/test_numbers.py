"""The one rounding rule (analysis/numbers.py): 3 decimals, not-finite values as None, the
same for a scalar and for every element of an array; and every analysis that rounds uses it."""

import math

import numpy as np

from tb_plugin.analysis.distributed import fsdp, run, tables
from tb_plugin.analysis.memory import curves, leaks, snapshot, timeline
from tb_plugin.analysis.numbers import DECIMALS, floats3, round3


def test_three_decimals_on_both_sides_of_the_half():
    assert DECIMALS == 3
    assert round3(2.3444) == 2.344  # below the half of the last kept decimal: down
    assert round3(2.3446) == 2.345  # above it: up
    assert round3(np.float32(0.25)) == 0.25 and type(round3(np.float32(0.25))) is float
    assert round3(7) == 7.0 and round3(-1.23456) == -1.235


def test_not_finite_values_are_none():
    for value in (math.nan, math.inf, -math.inf, np.float64("nan")):
        assert round3(value) is None
    assert round3(1e308) == 1e308  # finite, however large


def test_floats3_is_round3_of_each_element():
    values = np.array([1.00049, 1.00051, np.nan, -np.inf, 3.0])
    assert floats3(values) == [1.0, 1.001, None, None, 3.0]
    assert floats3(values) == [round3(v) for v in values]
    assert floats3([]) == []


def test_every_rounding_analysis_uses_the_one_rule():
    for module in (fsdp, run, tables, leaks, snapshot):
        assert module._round is round3, module.__name__
    for module in (curves, snapshot, timeline):
        assert module._floats is floats3, module.__name__
