"""`analysis.events`: the name predicates on both sides of each pattern, and the masks, ends,
launch joins and device ids on a hand-built trace (expected rows listed here)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis import events as E

from .helpers import cpu_op, device_event, kernel, make_table, memcpy, runtime


@pytest.mark.parametrize(("name", "comm"), [
    ("record_param_comms", True), ("nccl:all_reduce", True), ("rccl:broadcast", True),
    ("gloo:all_gather", True), ("mpi:send", True), ("ucc:x", True), ("xccl:x", True),
    ("hccl:x", True), ("c10d::allreduce_", True), ("c10d::all_reduce", True),
    ("_c10d_functional::all_gather_into_tensor", True), ("c10d_functional::broadcast", True),
    ("c10d::barrier", True), ("c10d::send", True), ("c10d::recv_", True),
    ("c10d::alltoall_base_", True), ("_allgather_base", True), ("_reduce_scatter_base", True),
    ("allgather_base_", True), ("reduce_scatter_base", True),
    ("nccl:", False), ("nccl: x", False), ("xnccl:all_reduce", False),
    ("record_param_comms_x", False), ("c10d::mm", False), ("aten::all_reduce", False),
    ("_allgather_base_x", False), ("torch.distributed.all_reduce", False),
])
def test_comm_op_names(name, comm):
    assert E.is_comm_op_name(name) is comm


@pytest.mark.parametrize(("name", "nccl"), [
    ("ncclKernel_AllReduce_RING_LL_Sum_float", True), ("ncclDevKernel_Generic", True),
    ("ncclAllReduceRingLLKernel_sum_f32", True), ("void ncclKernel_x", False),
    ("ncclAllReduce", False), ("rcclKernel", False),
])
def test_nccl_kernel_names(name, nccl):
    assert E.is_nccl_kernel_name(name) is nccl


@pytest.mark.parametrize(("name", "loader"), [
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", True),
    ("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", True),
    ("enumerate(DataPipe)#ShardingFilterIterDataPipe", True),
    ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__iter__", False),
    ("x enumerate(DataLoader)#a.__next__", False), ("DataLoader", False),
])
def test_dataloader_names(name, loader):
    assert E.is_dataloader_name(name) is loader


def _table(tmp_path):
    return make_table([
        cpu_op("nccl:all_reduce", 0, 50, ext=7),  # 0
        runtime(5, 2, corr=1, ext=7),  # 1
        kernel(10, 20, corr=1, ext=7, name="void reduce_kernel()"),  # 2: launched by a comm op
        cpu_op("gloo:broadcast", 60, 10, ext=8),  # 3
        runtime(62, 2, corr=2, ext=8),  # 4
        kernel(70, 5, corr=2, ext=8, name="void copy_kernel()"),  # 5: under gloo: not comm
        kernel(80, 5, name="ncclDevKernel_AllGather", device=1),  # 6: by name
        cpu_op("aten::mm", 90, 10, ext=9),  # 7
        runtime(92, 2, corr=3, ext=9), runtime(94, 2, corr=3, ext=9),  # 8, 9: one corr twice
        memcpy(100, 4, corr=3, ext=9),  # 10
        kernel(110, 4, corr=99, ext=0),  # 11: no launch
        device_event("kernel", "legacy", 120, 3, corr=None, device=None),  # 12: pid 0
    ], tmp_path)


def test_masks(tmp_path):
    table = _table(tmp_path)
    events = table.events
    names = events["name"].astype(str).tolist()
    assert names[6] == "ncclDevKernel_AllGather" and names[12] == "legacy"
    assert np.flatnonzero(E.comm_op_mask(events)).tolist() == [0, 3]
    assert np.flatnonzero(E.comm_kernel_mask(events)).tolist() == [2, 6]
    assert np.flatnonzero(E.kind_mask(events, E.HOST_KINDS)).tolist() == [0, 3, 7]
    assert np.flatnonzero(E.name_mask(events, lambda n: n.str.startswith("aten::"))
                          ).tolist() == [7]


def test_event_ends_treat_instants_as_zero_length():
    frame = pd.DataFrame({"ts": [1.0, 5.0, 7.0], "dur": [2.0, np.nan, 0.0]})
    assert E.event_ends(frame).tolist() == [3.0, 5.0, 7.0]


def test_launched_device_events_join_the_first_launch_of_a_correlation(tmp_path):
    frame = E.launched_device_events(_table(tmp_path).events)
    assert frame["event"].tolist() == [2, 5, 10]
    assert frame["launch"].tolist() == [1, 4, 8]
    assert frame["start"].tolist() == [10.0, 70.0, 100.0]
    assert frame["end"].tolist() == [30.0, 75.0, 104.0]
    assert frame["launch_start"].tolist() == [5.0, 62.0, 92.0]
    assert frame["launch_end"].tolist() == [7.0, 64.0, 94.0]


def test_launched_device_events_without_launches(tmp_path):
    frame = E.launched_device_events(make_table([kernel(1, 2, corr=1)], tmp_path).events)
    assert frame.empty and list(frame.columns) == ["event", "launch", "start", "end",
                                                   "launch_start", "launch_end"]


def test_kernel_device_ids(tmp_path):
    """`device` arg first, else a numeric pid (the CPU op's 100, the legacy kernel's 0), else
    NaN (a pid that is no number)."""
    table = _table(tmp_path)
    assert E.kernel_device_ids(table, np.array([2, 6, 10, 12, 0])).tolist() == [
        0.0, 1.0, 0.0, 0.0, 100.0]
    named = make_table([{**kernel(1, 2, corr=1, device=None), "pid": "GPU x"}], tmp_path)
    assert np.isnan(E.kernel_device_ids(named, np.array([0]))).tolist() == [True]


def test_category_flags_and_filled_categorical():
    names = pd.Series(pd.Categorical(["a", "b", None, "a", "c"]))
    assert E.category_flags(names, lambda n: n in ("a", "c")).tolist() == [
        True, False, False, True, True]
    # with rows: only the categories those rows use are tested
    assert E.category_flags(names, lambda n: True, np.array([1, 2])).tolist() == [
        False, True, False, False, False]
    plain = pd.Series(["x", "y", "x"])
    assert E.category_flags(plain, lambda n: n == "x").tolist() == [True, False, True]
    cat = E.filled_categorical(np.array([0, -1, 1]), pd.Index(["p", "q"]), "?")
    assert list(cat) == ["p", "?", "q"] and list(cat.categories) == ["p", "q", "?"]
    cat = E.filled_categorical(np.array([-1, 0]), pd.Index(["p", "?"]), "?")
    assert list(cat) == ["?", "p"] and list(cat.categories) == ["p", "?"]
