"""Counter sampling of the timeline (tb_plugin/analysis/timeline/counters.py) against a
brute-force loop per pixel bin, and the memory device labels.

Times are integers and values dyadic (0.25, 0.5, 1, 2...), so every integral is exact and the
oracle's means equal the code's bit for bit (the "repeated values are dropped" rule compares
them exactly)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tb_plugin.analysis.timeline.counters import (
    Series,
    _mean_series,
    _memory_device,
    sample,
    timeline_extras,
)
from tb_plugin.analysis.timeline.view import build_timeline

from .helpers import CPU_PID, CPU_TID, cpu_op, kernel, make_table


def _drop_repeats(t: list[float], v: list[float]) -> tuple[list[float], list[float]]:
    out_t, out_v = [], []
    for ti, vi in zip(t, v):
        if not out_v or vi != out_v[-1]:
            out_t.append(ti)
            out_v.append(vi)
    return out_t, out_v


def _mean_oracle(segments, edges) -> tuple[list[float], list[float]]:
    t, v = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        covered = sum(max(0.0, min(b, hi) - max(a, lo)) * value for a, b, value in segments)
        t.append(lo)
        v.append(covered / (hi - lo))
    return _drop_repeats(t, v)


def _peak_oracle(samples, edges) -> tuple[list[float], list[float]]:
    t, v = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        before = [value for ts, value in samples if ts < lo]
        inside = [value for ts, value in samples if lo <= ts < hi]
        candidates = ([before[-1]] if before else []) + inside
        if candidates:
            t.append(lo)
            v.append(max(candidates))
    return _drop_repeats(t, v)


def _segments(rng: np.random.Generator) -> list[tuple[float, float, float]]:
    cuts = np.sort(rng.choice(np.arange(0, 400), size=2 * int(rng.integers(1, 12)),
                              replace=False))
    values = rng.choice([0.25, 0.5, 1.0, 2.0], size=cuts.size // 2)
    return [(float(a), float(b), float(v)) for (a, b), v in zip(cuts.reshape(-1, 2), values)]


def _edges(rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(np.arange(-50, 450), size=int(rng.integers(2, 40)),
                              replace=False)).astype(np.float64)


@pytest.mark.parametrize("seed", range(8))
def test_mean_series_bins_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    segments = _segments(rng)
    a, b, v = (np.array(x, dtype=np.float64) for x in zip(*segments))
    series = _mean_series("s", "gpu_utilization", "GPU 0", "fraction", a, b, v)
    for _ in range(5):
        edges = _edges(rng)
        t, values = sample(series, edges)
        assert (t.tolist(), values.tolist()) == _mean_oracle(segments, edges.tolist())


@pytest.mark.parametrize("seed", range(8))
def test_peak_series_bins_against_a_loop(seed):
    rng = np.random.default_rng(100 + seed)
    times = np.sort(rng.choice(np.arange(0, 400), size=int(rng.integers(1, 30)), replace=False))
    values = rng.integers(0, 6, size=times.size).astype(np.float64)
    series = Series("m", "memory_allocated", "GPU 0", "bytes", "peak",
                    times.astype(np.float64), values)
    samples = list(zip(times.tolist(), values.tolist()))
    for _ in range(5):
        edges = _edges(rng)
        t, got = sample(series, edges)
        assert (t.tolist(), got.tolist()) == _peak_oracle(samples, edges.tolist())


def test_peak_bins_by_hand():
    series = Series("m", "memory_allocated", "GPU 0", "bytes", "peak",
                    np.array([10.0, 20.0, 25.0]), np.array([5.0, 9.0, 1.0]))
    # bins [0,10) [10,20) [20,30) [30,40): nothing yet; 5 at 10 (a sample on the edge is
    # inside its bin); max(5 carried, 9, 1) = 9; 1 carried
    t, v = sample(series, np.array([0.0, 10.0, 20.0, 30.0, 40.0]))
    assert (t.tolist(), v.tolist()) == ([10.0, 20.0, 30.0], [5.0, 9.0, 1.0])
    # a window after every sample carries the last value; repeats are dropped
    t, v = sample(series, np.array([50.0, 60.0, 70.0]))
    assert (t.tolist(), v.tolist()) == ([50.0], [1.0])


def test_mean_bins_by_hand():
    series = _mean_series("s", "gpu_utilization", "GPU 0", "fraction",
                          np.array([10.0, 30.0]), np.array([20.0, 35.0]), np.array([1.0, 0.5]))
    # [0,20): 10 of 20 busy = 0.5; [20,40): 5 at 0.5 over 20 = 0.125; [40,60): 0
    t, v = sample(series, np.array([0.0, 20.0, 40.0, 60.0]))
    assert (t.tolist(), v.tolist()) == ([0.0, 20.0, 40.0], [0.5, 0.125, 0.0])
    empty = _mean_series("s", "gpu_utilization", "GPU 0", "fraction", np.zeros(0), np.zeros(0),
                         np.zeros(0))
    t, v = sample(empty, np.array([0.0, 5.0, 10.0]))
    assert (t.tolist(), v.tolist()) == ([0.0], [0.0])


@pytest.mark.parametrize(("device_type", "device_id", "label"), [
    (0, 0, "CPU"), (0, -1, "CPU"), (0, 3, "CPU"),  # the CPU never gets a number
    (1, 0, "GPU 0"), (1, 2, "GPU 2"), (1, -1, "GPU"), (1, math.nan, "GPU"),
    (3, 1, "device type 3 1"), (2, -1, "device type 2"),
    (math.nan, 1, "device 1"), (math.nan, math.nan, "device"),
])
def test_memory_device_labels(device_type, device_id, label):
    assert _memory_device(device_type, device_id) == label


def test_memory_series_without_totals_are_the_running_sum_of_bytes(tmp_path):
    def mem(ts: float, nbytes: int, device_type: int, **totals: int) -> dict:
        args = {"Device Type": device_type, "Device Id": 0, "Addr": ts, "Bytes": nbytes}
        args.update({{"total": "Total Allocated", "reserved": "Total Reserved"}[k]: v
                     for k, v in totals.items()})
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": CPU_TID,
                "ts": ts, "cat": "cpu_instant_event", "args": args}

    events = [cpu_op("a", 0, 100), mem(30, 64, 1), mem(10, 100, 1), mem(20, -40, 1),
              mem(40, 8, 0, total=8, reserved=16)]
    extras = timeline_extras(make_table(events, tmp_path))
    series = {s.name: s for s in extras.series}
    assert sorted(series) == ["CPU Memory Allocated", "CPU Memory Reserved",
                              "GPU 0 Memory Allocated"]  # no reserved totals on the GPU
    gpu = series["GPU 0 Memory Allocated"]
    # in time order: +100, -40, +64 (not in file order)
    assert gpu.value.tolist() == [100, 60, 124]
    assert gpu.t.tolist() == [10_000, 20_000, 30_000]  # ticks (ns) from the trace start
    assert (gpu.mode, gpu.unit, gpu.kind, gpu.device) == ("peak", "bytes", "memory_allocated",
                                                          "GPU 0")
    assert series["CPU Memory Reserved"].value.tolist() == [16]


def test_counter_payload_rounds_fractions_to_4_decimals_and_bytes_to_integers(tmp_path):
    def mem(ts: float, total: float) -> dict:
        return {"ph": "i", "s": "t", "name": "[memory]", "pid": CPU_PID, "tid": CPU_TID,
                "ts": ts, "cat": "cpu_instant_event",
                "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 1,
                         "Total Allocated": total, "Total Reserved": 2 * total}}

    events = [cpu_op("a", 0, 3), kernel(0, 1), mem(1, 10.6)]
    counters = {c["name"]: c for c in build_timeline(make_table(events, tmp_path), start_us=0,
                                                     end_us=3, width=1)["counters"]}
    assert counters["GPU 0 Utilization"]["v"] == [0.3333]  # 1 us busy of 3
    assert counters["GPU 0 Memory Allocated"]["v"] == [11]  # 10.6 bytes: rounded
    assert counters["GPU 0 Memory Reserved"]["v"] == [21]   # 21.2
