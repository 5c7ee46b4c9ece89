"""Memory view: reference vectors (spec 3.11, 5.2 test_memory_view / TestMemoryCurve), the bug
fixes (7.9 pairing by device and address, 12e other device types), capacity, leaks, real traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.memory import view as mem
from tb_plugin.analysis.memory.curves import DEFAULT_MAX_POINTS, downsample
from tb_plugin.analysis.memory.leaks import (
    LEAK_GROWTH_BYTES,
    LEAK_MIN_STEPS,
    LEAK_NOISE_BYTES,
    growth_leak,
)
from tb_plugin.analysis.memory.records import _device_sort_key, default_device, device_name
from tb_plugin.load import load_trace
from tests.analysis.helpers import make_table
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

# --- test_memory_view (reference test_profiler.py) ---------------------------------------------

_VIEW_OPS = [
    ("aten::to", 10, 10),
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180),
    ("aten::to", 200, 60),
    ("aten::nll_loss_backward", 340, 70),
    ("ProfilerStep#1", 50, 400),
    ("ProfilerStep#2", 500, 500),
    ("aten::to", 510, 150),
    ("aten::copy_", 520, 100),
    ("aten::liner", 700, 100),
    ("aten::t", 705, 40),
    ("aten::transpose", 710, 30),
    ("aten::tranas_stride", 720, 10),
    ("aten::addmm", 750, 40),
    ("aten::to", 900, 100),
]
# (ts, device type, device id, addr, bytes); note the CPU free at 749 of address 690, which the
# GPU allocated at 690: the reference paired them (bug 7.9).
_VIEW_RECORDS = [
    (90, 0, -1, 90, 4), (150, 0, -1, 150, 4), (200, 0, -1, 200, 4), (210, 1, 0, 210, 4),
    (265, 1, 0, 265, 4), (300, 1, 0, 300, 4), (350, 1, 0, 350, 10), (360, 1, 0, 350, -10),
    (450, 0, -1, 450, 1000000), (515, 1, 0, 515, 100), (520, 1, 0, 520, 100),
    (600, 1, 0, 520, -100), (690, 1, 0, 690, 100), (701, 1, 0, 701, 100), (796, 1, 0, 515, -100),
    (708, 1, 0, 708, 100), (742, 1, 0, 708, -100), (715, 1, 0, 715, 50), (735, 1, 0, 715, -50),
    (725, 1, 0, 725, 50), (728, 1, 0, 725, -50), (729, 0, -1, 729, 50), (746, 0, -1, 746, 100),
    (747, 1, 0, 747, 20), (749, 0, -1, 690, -100), (760, 1, 0, 760, 30), (780, 1, 0, 760, -30),
    (795, 1, 0, 795, 10), (799, 1, 0, 795, -10),
]
# name: [self increase, self alloc size, self alloc count, increase, alloc size, alloc count, calls]
GPU_EXPECTED = {
    "aten::to": [104, 104, 2, 104, 204, 3, 4],
    "aten::nll_loss_backward": [0, 10, 1, 0, 10, 1, 1],
    "aten::copy_": [0, 100, 1, 0, 100, 1, 1],
    "aten::addmm": [0, 30, 1, 0, 30, 1, 1],
    "aten::tranas_stride": [0, 50, 1, 0, 50, 1, 1],
    "aten::transpose": [0, 50, 1, 0, 100, 2, 1],
    "aten::t": [0, 100, 1, 0, 200, 3, 1],
    "aten::liner": [20, 130, 3, 20, 360, 7, 1],
}
CPU_EXPECTED = {
    "aten::to": [4, 4, 1, 4, 4, 1, 4],
    "aten::liner": [0, 100, 1, 50, 150, 2, 1],
    "aten::tranas_stride": [50, 50, 1, 50, 50, 1, 1],
    "aten::transpose": [0, 0, 0, 50, 50, 1, 1],
    "aten::t": [0, 0, 0, 50, 50, 1, 1],
}
_METRICS = ("self_increase_bytes", "self_alloc_bytes", "self_alloc_count", "increase_bytes",
            "alloc_bytes", "alloc_count", "calls")


def _op(name: str, ts: float, dur: float, tid: Any = "123") -> dict[str, Any]:
    return {"ph": "X", "cat": "Operator", "name": name, "pid": 13721, "tid": tid, "ts": ts,
            "dur": dur, "args": {"Input Dims": [], "External id": 3}}


def _record(ts: float, device_type: int, device_id: int, addr: Any, size: float,
            total: Any = None, reserved: Any = None, tid: Any = 123) -> dict[str, Any]:
    args: dict[str, Any] = {"Device Type": device_type, "Device Id": device_id, "Bytes": size}
    if addr is not None:
        args["Addr"] = addr
    if total is not None:
        args["Total Allocated"] = total
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 13721, "tid": tid, "ts": ts,
            "args": args}


@pytest.fixture()
def view_table(tmp_path: Path):
    events = [_op(*op) for op in _VIEW_OPS] + [_record(*r) for r in _VIEW_RECORDS]
    return make_table(events, tmp_path)


def _stats_by_name(rows: list[dict[str, Any]], device: str) -> dict[str, list[int]]:
    return {r["name"]: [r[m] for m in _METRICS] for r in rows if r["device"] == device}


def test_memory_view_statistics(view_table) -> None:
    rows = mem.build_memory(view_table)["operators"]["rows"]
    assert {r["device"] for r in rows} == {"CPU", "GPU0"}
    assert _stats_by_name(rows, "GPU0") == GPU_EXPECTED
    assert _stats_by_name(rows, "CPU") == CPU_EXPECTED


def test_memory_view_statistics_in_a_range(view_table) -> None:
    rows = mem.build_memory(view_table, device="GPU0", start_us=500, end_us=650)
    stats = _stats_by_name(rows["operators"]["rows"], "GPU0")
    # aten::to [510, 660) allocates 100 at 515; its child copy_ allocates and frees 100
    assert stats == {"aten::to": [100, 100, 1, 100, 200, 2, 1],
                     "aten::copy_": [0, 100, 1, 0, 100, 1, 1]}


def test_pairs_by_device_and_address(view_table) -> None:
    rows = mem.build_memory(view_table)["events"]["rows"]
    gpu_690 = [r for r in rows if r["device"] == "GPU0" and r["alloc_t_us"] == 690]
    cpu_749 = [r for r in rows if r["device"] == "CPU" and r["free_t_us"] == 749]
    assert gpu_690 == [{"device": "GPU0", "op": "<unknown>", "bytes": 100, "alloc_t_us": 690.0,
                        "free_t_us": None, "duration_us": None}]
    assert cpu_749 == [{"device": "CPU", "op": "<unknown>", "bytes": 100, "alloc_t_us": None,
                        "free_t_us": 749.0, "duration_us": None}]
    copy_pair = [r for r in rows if r["alloc_t_us"] == 520]
    assert copy_pair[0]["op"] == "aten::copy_" and copy_pair[0]["duration_us"] == 80.0


def test_events_in_a_range_keep_pairs_touching_it(view_table) -> None:
    rows = mem.build_memory(view_table, device="GPU0", start_us=790, end_us=800)["events"]["rows"]
    # freed at 796 after an allocation at 515 (outside the range), and the pair at 795-799
    assert sorted((r["alloc_t_us"], r["free_t_us"]) for r in rows) == [(515.0, 796.0),
                                                                       (795.0, 799.0)]


def test_staled_records_are_reported(view_table) -> None:
    payload = mem.build_memory(view_table)
    assert payload["devices"] == ["CPU", "GPU0"] and payload["default_device"] == "GPU0"
    assert any("outside any operator" in m for m in payload["messages"])


def test_empty_op_label_shows_its_parent(tmp_path: Path) -> None:
    events = [_op("aten::conv2d", 100, 50), _op("aten::empty", 110, 5),
              _record(112, 0, -1, 1, 64, 64, 64)]
    rows = mem.build_memory(make_table(events, tmp_path))["events"]["rows"]
    assert rows[0]["op"] == "aten::conv2d (aten::empty)"


# --- TestMemoryCurve --------------------------------------------------------------------------

CURVE_CPU = [
    [1, 0, 0, 1, 4, 4, 0], [20, 0, 0, 1, -4, 0, 0], [100, 0, 0, 2, 8000, 8000, 0],
    [200, 0, 0, 2, -8000, 0, 0], [300, 0, 0, 3, 4, 4, 0], [400, 0, 0, 4, 16, 20, 0],
    [500, 0, 0, 5, 4000, 4020, 0], [600, 0, 0, 4, -16, 4004, 0], [700, 0, 0, 7, 80, 4084, 0],
    [800, 0, 0, 3, -4, 4080, 0], [900, 0, 0, 7, -80, 4000, 0], [905, 0, 0, 4, -4000, 0, 0],
]
CURVE_GPU = [
    [2, 1, 0, 11, 400, 400, 512], [22, 1, 0, 11, -400, 0, 512],
    [105, 1, 0, 12, 5000, 5000, 10240], [106, 1, 0, 13, 3000, 8000, 10240],
    [205, 1, 0, 12, -5000, 3000, 10240], [401, 1, 0, 14, 1024, 4024, 10240],
    [499, 1, 0, 15, 4, 4028, 10240], [501, 1, 0, 13, -3000, 1028, 10240],
    [502, 1, 0, 15, -4, 1024, 10240], [906, 1, 0, 14, -1024, 0, 10240],
]


@pytest.fixture()
def curve_table(tmp_path: Path):
    data = sorted(CURVE_CPU + CURVE_GPU, key=lambda e: e[0])
    events = [_record(ts, dev, dev_id, addr, size, total, reserved, tid=0)
              for ts, dev, dev_id, addr, size, total, reserved in data]
    for event in events:
        event["pid"] = 0
    return make_table(events, tmp_path)


@pytest.mark.parametrize(("device", "data"), [("CPU", CURVE_CPU), ("GPU0", CURVE_GPU)])
def test_memory_curve_is_a_step_plot(curve_table, device: str, data: list[list[int]]) -> None:
    payload = mem.build_memory(curve_table)
    origin = payload["time_origin_us"]
    assert origin == 1  # the profiler start: the first memory record
    curve = payload["curves"][device]
    assert len(curve["t_us"]) == 2 * len(data) - 1
    for i, t in enumerate(curve["t_us"]):
        source = data[i // 2]
        expected_t = source[0] if i % 2 == 0 else data[i // 2 + 1][0]  # odd: (t_i+1, values_i)
        assert t - origin == expected_t - 1
        assert curve["allocated"][i] == source[-2]
        # the CPU allocator has no reserved pool: no reserved series there
        assert curve["reserved"][i] == (None if device == "CPU" else source[-1])
    assert not curve["approximate"]


def test_memory_curve_peaks(curve_table) -> None:
    peaks = mem.build_memory(curve_table)["peaks"]
    assert peaks["CPU"]["bytes"] == 8000 and peaks["CPU"]["t_us"] == 100
    assert peaks["GPU0"]["bytes"] == 8000 and peaks["GPU0"]["t_us"] == 106
    assert peaks["GPU0"]["reserved_bytes"] == 10240 and peaks["CPU"]["reserved_bytes"] is None
    assert peaks["CPU"]["end_bytes"] == 0 and peaks["GPU0"]["end_bytes"] == 0
    assert peaks["GPU0"]["capacity_bytes"] is None  # no deviceProperties


def test_memory_curve_in_a_range_starts_with_the_value_in_force(curve_table) -> None:
    curve = mem.build_memory(curve_table, device="GPU0", start_us=150, end_us=450)
    assert list(curve["curves"]) == ["GPU0"]
    gpu = curve["curves"]["GPU0"]
    assert gpu["t_us"][0] == 150 and gpu["allocated"][0] == 8000  # alloc 13 at 106 in force
    assert gpu["t_us"][-1] == 450 and gpu["allocated"][-1] == 4024


def test_downsampling_keeps_first_last_and_peaks() -> None:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.1, 2.0, 50_000))
    y = rng.normal(0, 1, 50_000).cumsum()
    y[31_234] = y.max() + 100  # a narrow spike
    keep = downsample(t, y, 500)
    assert len(keep) <= 500
    assert keep[0] == 0 and keep[-1] == len(t) - 1
    assert 31_234 in keep
    assert np.all(np.diff(keep) > 0)


def test_curve_is_downsampled_to_max_points(tmp_path: Path) -> None:
    n = 3000
    sizes = np.where(np.arange(n) % 2 == 0, 1024, -512)
    totals = np.cumsum(sizes)
    events = [_record(float(i), 1, 0, i, int(s), int(a), 1 << 30) for i, (s, a) in
              enumerate(zip(sizes, totals))]
    curve = mem.build_memory(make_table(events, tmp_path), max_points=400)["curves"]["GPU0"]
    assert len(curve["t_us"]) <= 400
    assert max(curve["allocated"]) == int(totals.max())
    assert curve["t_us"][0] == 0 and curve["t_us"][-1] == n - 1


# --- devices, capacity, missing fields ----------------------------------------------------------

def test_other_device_types_get_names(tmp_path: Path) -> None:
    events = [_op("aten::add", 0, 100)]
    events += [_record(10, 12, 0, 1, 64, 64, 64), _record(20, 13, 0, 2, 32, 32, 32),
               _record(30, 7, 0, 3, 16, 16, 16), _record(40, 20, 1, 4, 8, 8, 8),
               _record(50, 0, -1, 5, 4, 4, 4)]
    payload = mem.build_memory(make_table(events, tmp_path))
    assert payload["devices"] == ["CPU", "device type 7:0", "XPU0", "MPS0", "PrivateUse1:1"]
    assert payload["default_device"] == "XPU0"  # the first accelerator, not the CPU
    assert payload["peaks"]["XPU0"]["bytes"] == 64 and payload["peaks"]["XPU0"][
        "capacity_bytes"] is None
    assert {r["device"] for r in payload["operators"]["rows"]} == set(payload["devices"])
    json.dumps(payload)


def test_device_name_helper() -> None:
    assert device_name(0, -1) == "CPU"
    assert device_name(1, 3) == "GPU3"
    assert device_name(12, 0) == "XPU0"
    assert device_name(6, 0) == "HIP0" and device_name(13, 0) == "MPS0"
    assert device_name(19, 2) == "MTIA2" and device_name(20, 1) == "PrivateUse1:1"


def test_devices_sort_cpu_then_cuda_by_id_then_other_types_then_unknown() -> None:
    nan = float("nan")
    devices = [(nan, 0.0), (1.0, 1.0), (3.0, 0.0), (0.0, 5.0), (1.0, 0.0), (2.0, 5.0),
               (1.0, nan), (2.0, 1.0), (0.0, -1.0)]
    ranked = sorted(devices, key=lambda d: _device_sort_key(*d))
    assert [(k if k == k else "nan", i if i == i else "nan") for k, i in ranked] == [
        (0.0, -1.0), (0.0, 5.0),                 # CPU (by id, as given)
        (1.0, "nan"), (1.0, 0.0), (1.0, 1.0),    # CUDA: no id first, then by id
        (2.0, 1.0), (2.0, 5.0), (3.0, 0.0),      # other types by (type, id)
        ("nan", 0.0)]                            # unknown type last


@pytest.mark.parametrize(("devices", "expected"), [
    (["CPU", "GPU0", "GPU1"], "GPU0"), (["CPU", "HIP0"], "HIP0"), (["CPU", "MPS0"], "MPS0"),
    (["CPU", "XPU1", "MTIA0"], "XPU1"), (["CPU", "MTIA0"], "MTIA0"),
    (["CPU", "PrivateUse1:0"], "PrivateUse1:0"), (["CPU", "device type 7:0"], "CPU"),
    (["device type 7:0"], "device type 7:0"), ([], None)])
def test_the_default_device_is_the_first_accelerator(devices: list, expected: Any) -> None:
    assert default_device(devices) == expected
    assert device_name(7, 0) == "device type 7:0"
    assert device_name(99, float("nan")) == "device type 99"
    assert device_name(float("nan"), 0) == "unknown device"


def test_peak_against_capacity(tmp_path: Path) -> None:
    props = [{"id": 0, "name": "A100", "totalGlobalMem": 1000}]
    events = [_record(1, 1, 0, 1, 950, 950, 1000), _record(2, 1, 0, 1, -950, 0, 1000)]
    peak = mem.build_memory(make_table(events, tmp_path, deviceProperties=props))["peaks"]["GPU0"]
    assert peak["capacity_bytes"] == 1000 and peak["fraction_of_capacity"] == 0.95
    assert (peak["bytes"], peak["t_us"], peak["reserved_bytes"], peak["end_bytes"]) == (
        950, 1.0, 1000, 0)
    props = [{"id": 0, "name": "A100", "totalGlobalMem": 3000}]
    peak = mem.build_memory(make_table(events, tmp_path, deviceProperties=props))["peaks"]["GPU0"]
    assert peak["fraction_of_capacity"] == 0.3167  # 950 / 3000, 4 decimals
    no_capacity = [{"id": 0, "name": "A100", "totalGlobalMem": 0}]
    peak = mem.build_memory(make_table(events, tmp_path, deviceProperties=no_capacity))[
        "peaks"]["GPU0"]
    assert peak["capacity_bytes"] is None and peak["fraction_of_capacity"] is None


def test_records_without_address_or_totals(tmp_path: Path) -> None:
    """PyTorch < 1.10: no Addr, no totals. Statistics still work; the curve is rebuilt."""
    events = [_op("aten::empty", 0, 10), _op("aten::add", 20, 10)]
    events += [_record(1, 1, 0, None, 100), _record(2, 1, 0, None, 50),
               _record(21, 1, 0, None, -100), _record(40, 1, 0, None, -200)]
    payload = mem.build_memory(make_table(events, tmp_path))
    curve = payload["curves"]["GPU0"]
    assert curve["approximate"]
    # running sum 100, 150, 50, -150: lifted by 150 so memory is never negative
    assert curve["allocated"] == [250, 250, 300, 300, 200, 200, 0]
    assert payload["events"]["rows"] == []
    stats = _stats_by_name(payload["operators"]["rows"], "GPU0")
    assert stats["aten::empty"][:3] == [150, 150, 2]
    assert stats["aten::add"][:3] == [-100, 0, 0]
    assert payload["messages"] == [
        "Memory records have no addresses (PyTorch < 1.10): allocation/release pairs are "
        "unavailable.",
        "Memory records have no totals (PyTorch < 1.10): curves are rebuilt from allocation "
        "sizes and start at zero.",
        "1 of 4 memory records happened outside any operator and count in no operator's "
        "statistics."]  # the record at 40 us: the ops are [0, 10] and [20, 30]


def test_trace_without_memory(tmp_path: Path) -> None:
    payload = mem.build_memory(make_table([_op("aten::add", 0, 10)], tmp_path))
    assert payload["devices"] == [] and payload["default_device"] is None
    assert payload["curves"] == {} and payload["operators"]["rows"] == []
    assert payload["messages"] == [
        "The trace has no memory records (profile_memory=True records them)."]
    json.dumps(payload)


def test_unknown_device(view_table) -> None:
    with pytest.raises(mem.UnknownDeviceError):
        mem.build_memory(view_table, device="GPU7")


# --- leaks -------------------------------------------------------------------------------------

def _steps_with_growth(per_step: Any, steps: int = 4) -> list[dict[str, Any]]:
    """`per_step` bytes kept by aten::linear in each step (an int, or one value per step)."""
    kept = per_step if isinstance(per_step, list) else [per_step] * steps
    events: list[dict[str, Any]] = []
    total = 0
    for i, per_step in enumerate(kept):
        start = 1000 * i
        events.append(_op(f"ProfilerStep#{i + 1}", start, 900))
        events.append(_op("aten::linear", start + 100, 500))
        # a temporary freed within the step, and `per_step` bytes kept
        total += 4096
        events.append(_record(start + 200, 1, 0, 10_000 + i, 4096, total, 1 << 30))
        total -= 4096
        events.append(_record(start + 300, 1, 0, 10_000 + i, -4096, total, 1 << 30))
        if per_step:
            total += per_step
            events.append(_record(start + 400, 1, 0, 20_000 + i, per_step, total, 1 << 30))
    return events


def test_growing_memory_is_flagged(tmp_path: Path) -> None:
    leaks = mem.build_memory(make_table(_steps_with_growth(2 << 20), tmp_path))["leaks"]
    # hand-derived: 2 MiB kept per step by aten::linear; what step 1 kept is not attributed
    assert leaks == [{"device": "GPU0", "kind": "growth", "steps": ["1", "2", "3", "4"],
                      "allocated_at_step_end": [2 << 20, 4 << 20, 6 << 20, 8 << 20],
                      "growth_bytes": 6 << 20, "per_step_bytes": 2 << 20,
                      "noise_bytes": int(0.005 * (8 << 20)), "approximate": False,
                      "top_ops": [{"name": "aten::linear", "count": 3, "bytes": 6 << 20}]}]


def test_flat_memory_is_not_flagged(tmp_path: Path) -> None:
    payload = mem.build_memory(make_table(_steps_with_growth(0), tmp_path))
    assert payload["leaks"] == []
    assert payload["peaks"]["GPU0"]["end_bytes"] == 0


def test_small_growth_is_not_flagged(tmp_path: Path) -> None:
    """1 KiB per step stays below the noise; what is alive at the end is shown, not flagged."""
    payload = mem.build_memory(make_table(_steps_with_growth(1024), tmp_path))
    assert payload["leaks"] == []
    assert payload["peaks"]["GPU0"]["end_bytes"] == 4 * 1024


def test_a_rise_in_one_step_only_is_not_flagged(tmp_path: Path) -> None:
    events = _steps_with_growth([0, 64 << 20, 0, 0])  # a cache filled once
    assert mem.build_memory(make_table(events, tmp_path))["leaks"] == []
    events = _steps_with_growth([4 << 20, 4 << 20, 4 << 10, 4 << 20])  # one rise in the noise
    assert mem.build_memory(make_table(events, tmp_path))["leaks"] == []


# --- real traces -------------------------------------------------------------------------------

CNN = SAMPLES / "cnn_bs32"
PT19 = SHARED_TRACES / "resnet50_gpu_pt19" / "worker0.1623143089861.pt.trace.json.gz"


def test_cnn_sample_memory() -> None:
    trace = sorted(CNN.glob("*.pt.trace.json.gz"))[0]
    payload = mem.build_memory(load_trace(str(trace), use_cache=False))
    assert payload["devices"] == ["CPU"]
    curve = payload["curves"]["CPU"]
    assert 2 < len(curve["t_us"]) <= DEFAULT_MAX_POINTS and not curve["approximate"]
    assert payload["peaks"]["CPU"]["bytes"] == max(curve["allocated"])
    assert payload["events"]["rows"] and payload["operators"]["rows"]
    assert all(r["bytes"] > 0 for r in payload["events"]["rows"])
    json.dumps(payload)


@needs_shared
def test_pytorch_19_trace_memory() -> None:
    payload = mem.build_memory(load_trace(str(PT19), use_cache=False))
    assert payload["devices"] == ["CPU", "GPU0"] and payload["default_device"] == "GPU0"
    assert payload["curves"]["GPU0"]["approximate"]
    assert payload["peaks"]["GPU0"]["capacity_bytes"] == 34084028416
    assert payload["events"]["rows"] == []  # no addresses to pair
    assert len(payload["operators"]["rows"]) > 20
    json.dumps(payload)


def test_event_table_cap_keeps_the_largest(view_table) -> None:
    everything = mem.build_memory(view_table)["events"]
    assert everything["total"] == len(everything["rows"]) and not everything["truncated"]
    events = mem.build_memory(view_table, max_events=3)["events"]
    assert events["total"] == everything["total"] and events["truncated"]
    assert [r["bytes"] for r in events["rows"]] == [1000000, 100, 100]  # time order kept


def _levels(values: list[int], names: list[str] | None = None):
    """Samples at t = 0, 10, 20...; step ends at 5, 15, 25... (one sample per step)."""
    t = 10.0 * np.arange(len(values))
    ends = t + 5.0
    return growth_leak(t, np.asarray(values, dtype=np.float64),
                       names or [str(i + 1) for i in range(len(values))], ends)


def test_growth_leak_total_rise_boundary():
    mib = 1 << 20
    assert mib == LEAK_GROWTH_BYTES and LEAK_MIN_STEPS == 3 and LEAK_NOISE_BYTES == 16 << 10
    # 3 step ends rising to exactly 1 MiB: flagged; noise max(16 KiB, 0.5% of 1 MiB) = 16 KiB
    assert _levels([0, mib // 2, mib]) == {
        "kind": "growth", "steps": ["1", "2", "3"],
        "allocated_at_step_end": [0, mib // 2, mib], "growth_bytes": mib,
        "per_step_bytes": mib // 2, "noise_bytes": 16 << 10}
    assert _levels([0, mib // 2, mib - 1]) is None  # 1 byte short
    assert _levels([0, mib]) is None  # 2 steps: fewer than LEAK_MIN_STEPS
    assert _levels([0, mib, mib // 2, 2 * mib]) is None  # one step fell


def test_growth_leak_rises_must_exceed_the_noise_strictly():
    # 65 step ends, each rise r: the total is 64 r >= 1 MiB for r >= 16 KiB; the highest level
    # 64 r is below 16 KiB / 0.5%, so the noise is 16 KiB
    noise = LEAK_NOISE_BYTES
    flagged = _levels([k * (noise + 1) for k in range(65)])
    assert flagged is not None
    assert (flagged["noise_bytes"], flagged["per_step_bytes"], flagged["growth_bytes"]) == (
        noise, noise + 1, 64 * (noise + 1))
    assert _levels([k * noise for k in range(65)]) is None  # rises equal to the noise


def test_growth_leak_noise_is_a_fraction_of_the_highest_level():
    mib = 1 << 20
    # highest 800 MiB: noise 0.5% = 4 MiB; rises of 4 MiB + 1 byte pass, 4 MiB do not
    base = 800 * mib - 2 * (4 * mib + 1)
    assert _levels([base, base + 4 * mib + 1, base + 8 * mib + 2])["noise_bytes"] == 4 * mib
    base = 800 * mib - 8 * mib
    assert _levels([base, base + 4 * mib, base + 8 * mib]) is None


def test_growth_leak_needs_a_sample_before_every_step_end():
    t = np.array([10.0, 20.0, 30.0])
    level = np.array([0.0, 1 << 20, 2 << 20])
    names = ["a", "b", "c"]
    # a step end at the first sample counts it (the level after it); one before it: no flag
    assert growth_leak(t, level, names, np.array([10.0, 20.0, 30.0]))["steps"] == names
    assert growth_leak(t, level, names, np.array([9.0, 20.0, 30.0])) is None
    assert growth_leak(np.zeros(0), np.zeros(0), names, np.array([1.0, 2.0, 3.0])) is None


def test_event_rows_are_rounded_and_capped_to_the_largest_in_time_order(tmp_path: Path) -> None:
    events = [_op("aten::empty", 0, 100),
              _record(10.12345, 1, 0, 1, 100), _record(20.5, 1, 0, 1, -100),
              _record(30, 1, 0, 2, 300), _record(40, 1, 0, 2, -300),
              _record(50, 1, 0, 3, 200)]
    table = make_table(events, tmp_path)
    rows = mem.build_memory(table, device="GPU0")["events"]
    assert rows["total"] == 3
    assert rows["rows"][0] == {"device": "GPU0", "op": "aten::empty", "bytes": 100,
                               "alloc_t_us": 10.123, "free_t_us": 20.5,
                               "duration_us": 10.377}  # 20.5 - 10.12345 = 10.37655
    capped = mem.build_memory(table, device="GPU0", max_events=2)["events"]
    assert capped["total"] == 3  # all are counted, the 2 largest are listed, in time order
    assert [(r["bytes"], r["alloc_t_us"]) for r in capped["rows"]] == [(300, 30.0), (200, 50.0)]
    assert [r["bytes"] for r in mem.build_memory(table, device="GPU0", max_events=3)[
        "events"]["rows"]] == [100, 300, 200]
