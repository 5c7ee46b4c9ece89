"""`analysis.gpu_metrics`' building blocks on hand-made arrays, at their boundaries: the
timeline's power-of-ten bucket (at most `MAX_BUCKETS`, none under 1 us), the weighted coverage
(weights summed and capped at 1, a start sorting before an end at the same time, zero weights
and zero-length kernels left out), the time-weighted occupancy and SM efficiency over a window,
and the profiling window (`PyTorch Profiler (0)` span, else the events' extent)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.analysis import gpu_metrics as G
from tb_plugin.analysis import ranges as rg

from .helpers import cpu_op, make_table


def _busy(*pairs):
    return rg.merge(np.array([p[0] for p in pairs], dtype=float),
                    np.array([p[1] for p in pairs], dtype=float))


@pytest.mark.parametrize(("span", "bucket", "count"), [
    (1.0, 1.0, 1), (100.0, 1.0, 100), (100.5, 10.0, 10), (1000.0, 10.0, 100),
    (1000.1, 100.0, 10), (55.5, 1.0, 55),
])
def test_timeline_bucket_size(span, bucket, count):
    timeline = G.utilization_timeline(_busy((0.0, 0.5)), 0.0, span)
    assert timeline.bucket_us == bucket
    assert len(timeline.times) == count + 1 and len(timeline.values) == count + 1
    assert timeline.times[-1] == span and timeline.values[-1] == 0.0
    assert timeline.times[:count].tolist() == [i * bucket for i in range(count)]


def test_timeline_values_are_busy_shares_and_the_last_bucket_runs_to_the_end():
    # span 25 us: buckets of 1 us; busy [0.5, 2) and [24, 25)
    timeline = G.utilization_timeline(_busy((0.5, 2.0), (24.0, 25.0)), 100.0, 125.0)
    assert timeline.values[0] == 0.0  # the busy ranges are on another clock range
    timeline = G.utilization_timeline(_busy((100.5, 102.0), (124.0, 125.5)), 100.0, 125.5)
    assert timeline.bucket_us == 1.0 and len(timeline.values) == 26
    assert list(timeline.values[:3]) == [0.5, 1.0, 0.0]
    # the 25th bucket is [124, 125.5): fully busy
    assert timeline.times[24] == 124.0 and timeline.values[24] == 1.0
    assert timeline.times[25] == 125.5


def test_timeline_needs_a_span_of_one_us():
    for start, end in ((0.0, 0.99), (None, 5.0), (0.0, None), (5.0, 5.0)):
        timeline = G.utilization_timeline(_busy((0.0, 1.0)), start, end)
        assert (timeline.bucket_us, len(timeline.times), len(timeline.values)) == (0.0, 0, 0)


def test_weighted_coverage():
    starts = np.array([0.0, 5.0, 10.0, 20.0, 30.0, 40.0])
    ends = np.array([10.0, 15.0, 12.0, 25.0, 30.0, 45.0])
    weights = np.array([0.5, 0.75, 0.25, np.nan, 1.0, 0.0])
    a, b, v = G.weighted_coverage(starts, ends, weights)
    # [0,5) 0.5; [5,10) 1.25 -> 1; [10,12) 0.75 + 0.25; [12,15) 0.75; NaN, zero-length and
    # zero-weight kernels are left out
    assert a.tolist() == [0.0, 5.0, 10.0, 12.0]
    assert b.tolist() == [5.0, 10.0, 12.0, 15.0]
    assert v.tolist() == [0.5, 1.0, 1.0, 0.75]


def test_weighted_coverage_of_back_to_back_kernels_and_of_none():
    a, b, v = G.weighted_coverage(np.array([0.0, 10.0]), np.array([10.0, 20.0]),
                                  np.array([0.25, 0.5]))
    assert (a.tolist(), b.tolist(), v.tolist()) == ([0.0, 10.0], [10.0, 20.0], [0.25, 0.5])
    a, b, v = G.weighted_coverage(np.array([0.0]), np.array([10.0]), np.array([-1.0]))
    assert len(a) == len(b) == len(v) == 0


def test_sm_efficiency_and_occupancy_over_a_window():
    sm = (np.array([0.0, 10.0]), np.array([10.0, 30.0]), np.array([1.0, 0.5]))
    # window [5, 25): 5 us at 1.0 + 15 us at 0.5 = 12.5 of 20
    assert G._sm_efficiency(sm, 5.0, 25.0) == 12.5 / 20
    assert G._sm_efficiency(sm, 30.0, 40.0) is None  # touching the window is not inside
    starts, ends = np.array([0.0, 10.0, 12.0, 14.0]), np.array([10.0, 30.0, 13.0, 15.0])
    occupancy = np.array([40.0, 10.0, np.nan, -5.0])
    # window [5, 25): 5 us at 40, 15 us at 10 -> (200 + 150) / 20
    assert G._occupancy(starts, ends, occupancy, 5.0, 25.0) == 350.0 / 20
    assert G._occupancy(starts, ends, np.array([0.0, 0.0, 0.0, 0.0]), 5.0, 25.0) == 0.0
    assert G._occupancy(starts, ends, occupancy, 30.0, 40.0) is None


def test_global_span(tmp_path):
    profiler = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                "tid": "PyTorch Profiler", "ts": 50, "dur": 500}
    table = make_table([cpu_op("aten::add", 10, 5), profiler, cpu_op("aten::mul", 900, 10)],
                       tmp_path)
    assert G.global_span(table) == (50.0, 550.0)
    table = make_table([cpu_op("aten::add", 10, 5), cpu_op("aten::mul", 900, 10)], tmp_path)
    assert G.global_span(table) == (10.0, 910.0)
    other = {**profiler, "name": "PyTorch Profiler (1)"}
    table = make_table([cpu_op("aten::add", 10, 5), other], tmp_path)
    assert G.global_span(table) == (10.0, 550.0)
