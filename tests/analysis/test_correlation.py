"""Device event -> launch -> operator correlation (spec 3.2, bug 7.7)."""

from __future__ import annotations

import glob

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.correlation import (
    external_ids_usable,
    first_launch_per_correlation,
    launches,
    match_external_ids,
)
from tb_plugin.analysis.kernels import build_kernels
from tb_plugin.analysis.node_kinds import NodeKind
from tb_plugin.analysis.operators import build_operators
from tb_plugin.analysis.optree import build_op_tree
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import make_table
from .legacy_events import kernel, op, runtime

SHARED = str(SHARED_TRACES)


def by_name(table):
    return {row["name"]: row for row in build_operators(table)["rows"]}


def test_runtime_launch_multiple_kernels(tmp_path):
    """test_runtime_launch_multipe_kernels: one runtime (cudaLaunchCooperativeKernelMultiDevice)
    starts two kernels; the op's device time is their sum."""
    name = "ncclBroadcastRingLLKernel_copy_i8(ncclColl)"
    events = [
        op("Broadcast", 100, 300, 2),
        runtime(130, 20, 335, 2, name="cudaLaunchCooperativeKernelMultiDevice"),
        {**kernel(160, 120318, 335, 2, name=name), "tid": "stream 13"},
        {**kernel(170, 132800, 335, 2, name=name), "tid": "stream 22"},
    ]
    table = make_table(events, tmp_path)
    assert build_operators(table)["rows"][0]["device_total_us"] == 120318 + 132800
    assert build_kernels(table)["rows"][0]["calls"] == 2
    assert len(build_kernels(table, "kernel_op_launch")["rows"]) == 1
    links = launches(table)
    assert len(links.device_rows) == 2 and (links.device_launch >= 0).all()


def test_top_level_runtime(tmp_path):
    """test_top_level_runtime: a runtime with external id 0 on another thread adds no device
    time to the op; the kernel still counts in the kernel table."""
    events = [op("aten::mm", 100, 100, 2, tid="123"), runtime(130, 20, 335, 0),
              kernel(220, 8, 335, 0)]
    table = make_table(events, tmp_path)
    row = build_operators(table)["rows"][0]
    assert (row["device_total_us"], row["device_self_us"]) == (0, 0)
    assert build_kernels(table)["rows"][0]["calls"] == 1


def test_external_id_zero_belongs_to_the_root(tmp_path):
    events = [op("aten::mm", 100, 100, 2), runtime(130, 20, 335, 0), kernel(220, 8, 335, 0)]
    table = make_table(events, tmp_path)
    tree = build_op_tree(table)
    assert build_operators(table)["rows"][0]["device_total_us"] == 0
    assert tree.device_total[tree.roots[0]] == 8
    row = build_kernels(table, "kernel_op_launch")["rows"][0]
    assert row["operator"] == "N/A"


def test_runtime_on_another_thread_follows_its_external_id(tmp_path):
    events = [op("op1", 200, 60, 3, tid="123"), runtime(210, 5, 1000, 3, tid="456"),
              kernel(230, 15, 1000, 3)]
    row = build_operators(make_table(events, tmp_path))["rows"][0]
    assert row["device_self_us"] == 15
    assert row["host_self_us"] == 60 - 5


def test_driver_launch_counts_as_runtime(tmp_path):
    """Bug 7.7: Triton launches kernels with cuLaunchKernel (cat cuda_driver)."""
    events = [op("triton_poi_fused_add_0", 100, 50, 3, cat="cpu_op"),
              runtime(110, 20, 35, 3, name="cuLaunchKernel", cat="cuda_driver"),
              kernel(140, 2, 35, 3, name="triton_poi_fused_add_0")]
    table = make_table(events, tmp_path)
    row = build_operators(table)["rows"][0]
    assert row["device_self_us"] == 2
    assert row["host_self_us"] == 50 - 20


def test_staled_kernels_park_on_the_main_thread(tmp_path):
    """A kernel whose launch is missing hangs off the ProfilerStep thread's root, once; a staled
    memcpy does not enter the tree."""
    events = [op("ProfilerStep#1", 0, 500, 1, tid="1"), op("aten::mm", 10, 50, 2, tid="1"),
              op("ProfilerStep#1", 0, 500, 1, tid="2", cat="user_annotation"),
              kernel(20, 7, 999, 0),
              {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": "stream 7",
               "ts": 30, "dur": 3, "args": {"correlation": 998, "device": 0}}]
    table = make_table(events, tmp_path)
    links = launches(table)
    assert len(links.staled_rows) == 2
    tree = build_op_tree(table)
    roots = tree.roots
    assert list(tree.device_total[roots]) == [7, 0]
    assert tree.kind[tree.device_owner[0]] == NodeKind.ROOT
    assert build_operators(table)["rows"][0]["device_total_us"] == 0
    (row,) = build_kernels(table, "kernel_op_launch")["rows"]
    assert (row["operator"], row["total_us"]) == ("N/A", 7)
    assert tree.tc_eligible_ops_kernel_ratio() == 0.0  # staled kernels never count


def test_staled_kernels_without_main_thread_are_not_in_the_tree(tmp_path):
    table = make_table([op("aten::mm", 10, 50, 2), kernel(20, 7, 999, 0)], tmp_path)
    assert len(build_op_tree(table).device_rows) == 0
    assert build_kernels(table)["rows"][0]["calls"] == 1
    assert build_kernels(table, "kernel_op_launch")["rows"] == []


def test_launch_without_matching_id_attaches_by_time(tmp_path):
    """No id, or an id of no op: the innermost op open at the launch on its thread owns it
    (the reference dropped such launches and their kernels)."""
    events = [op("aten::outer", 100, 100, 2), op("aten::inner", 110, 30, 3),
              runtime(120, 5, 1, 77), kernel(300, 4, 1, 77),
              {**runtime(150, 5, 2, 0), "args": {"correlation": 2}}, kernel(310, 6, 2, 0)]
    rows = by_name(make_table(events, tmp_path))
    assert rows["aten::inner"]["device_self_us"] == 4
    assert rows["aten::outer"]["device_self_us"] == 6
    assert rows["aten::outer"]["host_self_us"] == 100 - 30 - 5


def test_correlation_ids_used_as_external_ids(tmp_path):
    """PyTorch 2.1-era Kineto wrote "External id" = correlation on launches: such ids may
    collide with op ids, so launches are attached by time instead."""
    events = [op("aten::a", 100, 50, 5), op("aten::b", 200, 50, 7),
              runtime(210, 5, 5, 5), kernel(300, 4, 5, 5),
              runtime(110, 5, 6, 6), kernel(310, 6, 6, 6)]
    rows = by_name(make_table(events, tmp_path))
    assert rows["aten::b"]["device_self_us"] == 4  # not aten::a, whose id happens to be 5
    assert rows["aten::a"]["device_self_us"] == 6


def test_first_launch_per_correlation_keeps_the_earliest():
    rows = np.array([10, 11, 12, 13])
    corr = np.array([5.0, 5.0, np.nan, 2.0])
    ts = np.array([3.0, 1.0, 0.0, 9.0])
    first = first_launch_per_correlation(rows, corr, ts)
    assert first.to_dict() == {2.0: 13, 5.0: 11}


def test_match_external_ids_prefers_priority_and_skips_zero():
    op_ext = np.array([4.0, 4.0, 0.0, np.nan, 9.0])
    priority = np.array([1, 0, 2, 3, 4])
    got = match_external_ids(np.array([4.0, 0.0, 9.0, np.nan, 5.0]), op_ext, priority)
    assert list(got) == [1, -1, 4, -1, -1]


def test_external_ids_usable():
    assert external_ids_usable(np.array([1.0, 2.0, 3.0]), np.array([7.0, 8.0, 9.0]))
    assert not external_ids_usable(np.array([7.0, 8.0, 3.0]), np.array([7.0, 8.0, 9.0]))
    assert external_ids_usable(np.array([np.nan, 0.0]), np.array([1.0, 2.0]))


@needs_shared
def test_triton_kernel_attributed_to_its_op():
    (path,) = glob.glob(f"{SHARED}/triton_kernels/*.json.gz")
    rows = by_name(load_trace(path, use_cache=False))
    triton = rows["triton_poi_fused_add_cos_sin_0"]
    assert triton["device_self_us"] > 0
    assert rows["Torch-Compiled Region: 0/0"]["device_total_us"] == triton["device_total_us"]


@needs_shared
@pytest.mark.parametrize("run", ["ddp_2ranks_sampled", "alexnet_gpu"])
def test_traces_with_correlation_external_ids_still_attribute_kernels(run):
    path = sorted(glob.glob(f"{SHARED}/{run}/*.json.gz"))[0]
    table = load_trace(path, use_cache=False)
    tree = build_op_tree(table)
    kernels = table.events["kind"].to_numpy() == 6
    attributed = pd.Series(tree.device_rows).isin(np.flatnonzero(kernels)).sum()
    assert attributed == kernels.sum()
    device = sum(row["device_self_us"] for row in build_operators(table)["rows"])
    assert device > 0
