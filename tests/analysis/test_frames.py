"""`analysis.frames` (the Python API's DataFrames) on small hand-built traces: column names and
units, dtypes, the device selection and its error, the module tree's keys and depths, and the
collective rows with their columns (also when there are none).

Expected values are the events written here (times, byte counts), not the module's output.
"""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.analysis import frames as Fr
from tb_plugin.analysis.breakdown import CATEGORIES
from tb_plugin.analysis.memory.view import UnknownDeviceError
from tests.analysis.helpers import cpu_op, kernel, make_table, py, runtime, step


def _mem(ts, device_type, device_id, nbytes, total, addr):
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100,
            "tid": 200, "ts": ts, "args": {"Device Type": device_type, "Device Id": device_id,
                                           "Addr": addr, "Bytes": nbytes,
                                           "Total Allocated": total, "Total Reserved": total}}


def _memory_table(tmp_path):
    """An allocation on the CPU inside aten::empty, two on GPU 1 inside aten::zeros (one freed
    55 us later, outside any operator), one on GPU 0 inside aten::ones. The Memory view names
    an aten::empty with its parent: "ProfilerStep#1 (aten::empty)"."""
    return make_table([
        step(1, 0, 100), step(2, 100, 100), step(3, 200, 100),
        cpu_op("aten::empty", 10, 20), _mem(12, 0, -1, 512, 512, 1),
        cpu_op("aten::zeros", 110, 20), _mem(112, 1, 1, 2048, 2048, 3),
        _mem(115, 1, 1, 1024, 3072, 4),
        cpu_op("aten::ones", 140, 20), _mem(145, 1, 0, 4096, 4096, 5),
        _mem(170, 1, 1, -1024, 6144, 4),
    ], tmp_path)


def test_category_column():
    assert Fr.category_column("CPU Exec") == "cpu_exec_us"
    assert Fr.category_column("Kernel") == "kernel_us"
    assert Fr.category_column("A B C") == "a_b_c_us"
    assert [Fr.category_column(c) for c in CATEGORIES] == [
        c.lower().replace(" ", "_") + "_us" for c in CATEGORIES]


def test_step_frame_columns_and_values(tmp_path):
    table = make_table([step(1, 0, 100), step(2, 100, 150), step(3, 250, 100),
                        cpu_op("aten::add", 10, 30), cpu_op("aten::mul", 110, 40)], tmp_path)
    frame = Fr.step_frame(table)
    assert list(frame.columns) == ["step", "start_us", "end_us", "total_us",
                                   *(Fr.category_column(c) for c in CATEGORIES)]
    assert frame["step"].tolist()[:2] == ["1", "2"]
    assert frame["start_us"].tolist()[:2] == [0.0, 100.0]
    assert frame["end_us"].tolist()[:2] == [100.0, 250.0]
    assert frame["total_us"].tolist()[:2] == [100.0, 150.0]
    assert frame["cpu_exec_us"].tolist()[:2] == [30.0, 40.0]
    parts = frame[[Fr.category_column(c) for c in CATEGORIES]].sum(axis=1)
    assert np.allclose(parts, frame["total_us"])


def test_memory_devices_and_the_unknown_device_error(tmp_path):
    table = _memory_table(tmp_path)
    assert Fr.memory_devices(table) == ["CPU", "GPU0", "GPU1"]
    for device in (None, "CPU", "GPU0", "GPU1"):
        Fr.memory_event_frame(table, device)
        Fr.memory_operator_frame(table, device)
    for build in (Fr.memory_event_frame, Fr.memory_operator_frame):
        with pytest.raises(UnknownDeviceError) as error:
            build(table, "GPU7")
        assert str(error.value).strip("\"'") == (
            "no memory records of device 'GPU7'; devices: CPU, GPU0, GPU1")
    bare = make_table([cpu_op("aten::add", 0, 10)], tmp_path)
    assert Fr.memory_devices(bare) == []
    for build in (Fr.memory_event_frame, Fr.memory_operator_frame):
        with pytest.raises(UnknownDeviceError) as error:
            build(bare, "CPU")
        assert str(error.value).strip("\"'") == (
            "no memory records of device 'CPU'; devices: none")
    assert Fr.memory_event_frame(bare).empty


def test_memory_event_frame(tmp_path):
    frame = Fr.memory_event_frame(_memory_table(tmp_path))
    assert list(frame.columns) == list(Fr.MEMORY_EVENT_COLUMNS)
    assert {c: str(t) for c, t in frame.dtypes.items()} == {
        "device": "object", "op": "object", "bytes": "int64", "alloc_t_us": "float64",
        "free_t_us": "float64", "duration_us": "float64"}
    assert frame["device"].tolist() == ["CPU", "GPU1", "GPU1", "GPU0"]
    assert frame["op"].tolist() == [
        "ProfilerStep#1 (aten::empty)", "aten::zeros", "aten::zeros", "aten::ones"]
    assert frame["bytes"].tolist() == [512, 2048, 1024, 4096]
    assert frame["alloc_t_us"].tolist() == [12.0, 112.0, 115.0, 145.0]
    assert frame["free_t_us"].isna().tolist() == [True, True, False, True]
    assert frame["free_t_us"][2] == 170.0 and frame["duration_us"][2] == 55.0
    gpu1 = Fr.memory_event_frame(_memory_table(tmp_path), "GPU1")
    assert gpu1["bytes"].tolist() == [2048, 1024]
    window = Fr.memory_event_frame(_memory_table(tmp_path), None, 100.0, 200.0)
    assert window["device"].tolist() == ["GPU1", "GPU1", "GPU0"]
    window = Fr.memory_event_frame(_memory_table(tmp_path), None, 100.0, 140.0)
    assert window["bytes"].tolist() == [2048, 1024]
    window = Fr.memory_event_frame(_memory_table(tmp_path), None, 0.0, 50.0)
    assert window["bytes"].tolist() == [512]


def test_memory_operator_frame_selects_the_device(tmp_path):
    table = _memory_table(tmp_path)
    every = Fr.memory_operator_frame(table)
    assert sorted(zip(every["device"], every["name"])) == [
        ("CPU", "aten::empty"), ("GPU0", "aten::ones"), ("GPU1", "aten::zeros")]
    gpu1 = Fr.memory_operator_frame(table, "GPU1")
    assert gpu1["name"].tolist() == ["aten::zeros"] and gpu1.index.tolist() == [0]
    row = gpu1.iloc[0]
    assert (row["calls"], row["alloc_bytes"], row["alloc_count"]) == (1, 3072, 2)
    assert (row["self_alloc_bytes"], row["self_alloc_count"]) == (3072, 2)
    assert list(gpu1.columns) == list(every.columns) == [
        "device", "name", "calls", "self_increase_bytes", "self_alloc_bytes",
        "self_alloc_count", "increase_bytes", "alloc_bytes", "alloc_count"]
    # [start_us, end_us]: only aten::zeros' allocations, or only aten::empty's
    assert Fr.memory_operator_frame(table, None, 100.0, 140.0)["name"].tolist() == [
        "aten::zeros"]
    assert Fr.memory_operator_frame(table, None, 0.0, 50.0)["name"].tolist() == [
        "aten::empty"]
    assert Fr.memory_operator_frame(table, None, 140.0, None)["name"].tolist() == [
        "aten::ones"]
    gpu0 = Fr.memory_operator_frame(table, "GPU0")
    assert gpu0["name"].tolist() == ["aten::ones"] and gpu0.index.tolist() == [0]
    assert gpu0.iloc[0]["alloc_bytes"] == 4096
    for column in ("calls", "self_increase_bytes", "self_alloc_bytes", "self_alloc_count",
                   "increase_bytes", "alloc_bytes", "alloc_count"):
        assert str(every[column].dtype) == "int64", column


def test_module_frame_keys_parents_and_depths(tmp_path):
    table = make_table([
        step(1, 0, 200), step(2, 200, 100),
        py("nn.Module: Net_0", 5, 100, python_id=1, module=7),
        py("nn.Module: Linear_0", 10, 30, python_id=2, parent=1, module=8),
        py("nn.Module: Relu_0", 50, 20, python_id=3, parent=1, module=9),
    ], tmp_path)
    frame = Fr.module_frame(table)
    assert list(frame.columns[:3]) == list(Fr.MODULE_TREE_COLUMNS)
    assert frame["name"].tolist() == ["Net_0", "Linear_0", "Relu_0"]
    assert frame["key"].tolist() == ["0", "0-0", "0-1"]
    assert frame["parent_key"].tolist()[1:] == ["0", "0"] and frame["parent_key"].isna()[0]
    assert frame["depth"].tolist() == [0, 1, 1]
    assert frame["host_total_us"].tolist() == [100.0, 30.0, 20.0]
    assert "children" not in frame.columns and "missing_calls" not in frame.columns
    empty = Fr.module_frame(make_table([cpu_op("aten::add", 0, 10)], tmp_path))
    assert empty.empty and list(empty.columns) == ["key", "parent_key", "depth"]


def test_collective_frame(tmp_path):
    def worker(dur):
        return make_table([step(1, 0, 100), step(2, 100, 100),
                           cpu_op("nccl:all_reduce", 10, dur), cpu_op("nccl:broadcast", 50, 5),
                           cpu_op("nccl:all_reduce", 110, dur)], tmp_path)
    frame = Fr.collective_frame({"w1": worker(20), "w0": worker(30)})
    assert list(frame.columns) == Fr._COLLECTIVE_COLUMNS
    assert list(zip(frame["worker"], frame["name"], frame["calls"])) == [
        ("w0", "nccl:all_reduce", 2), ("w0", "nccl:broadcast", 1),
        ("w1", "nccl:all_reduce", 2), ("w1", "nccl:broadcast", 1)]
    assert frame["total_latency_us"].tolist() == [60.0, 5.0, 40.0, 5.0]
    assert frame["avg_latency_us"].tolist() == [30.0, 5.0, 20.0, 5.0]
    none = Fr.collective_frame({"w0": make_table([cpu_op("aten::add", 0, 10),
                                                  runtime(1, 1, corr=1),
                                                  kernel(3, 4, corr=1)], tmp_path)})
    assert none.empty and list(none.columns) == Fr._COLLECTIVE_COLUMNS


def test_module_frame_missing_calls_are_ints_and_zero_elsewhere(tmp_path):
    """A module call without a duration has no tree node: its row says missing_calls 1; the
    rows without missing calls read 0 (an int column)."""
    table = make_table([
        py("nn.Module: Net_0", 0, 100, 1, module=0),
        py("nn.Module: Linear_0", 10, 50, 2, parent=1, module=0),
        py("nn.Module: Broken_0", 70, None, 3, parent=1, module=0),
        cpu_op("aten::mm", 20, 10),
    ], tmp_path)
    frame = Fr.module_frame(table)
    by_name = dict(zip(frame["name"], frame["missing_calls"]))
    assert by_name == {"Net_0": 0, "Linear_0": 0, "Broken_0": 1}
    assert str(frame["missing_calls"].dtype) == "int64"
