"""Operator trees (spec 3.3): nesting, clamping, duplicate removal, self/total times."""

from __future__ import annotations

import glob

import numpy as np
import pytest

from tb_plugin.analysis.correlation import complete_rows
from tb_plugin.analysis.node_kinds import NodeKind, node_kinds
from tb_plugin.analysis.operators import build_operators
from tb_plugin.analysis.optree import build_op_tree
from tb_plugin.ingest import Kind
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import make_table
from .legacy_events import kernel, op, runtime

SHARED = str(SHARED_TRACES)


def by_name(table):
    return {row["name"]: row for row in build_operators(table)["rows"]}


def test_external_id_attaches_zero_length_runtimes(tmp_path):
    """Spec 3.3 vector / test_external_id: zero-length runtimes at an op's start and end belong
    to the op their external id names, not to whatever contains them in time."""
    events = [
        op("aten::mat_mul", 100, 100, 2), op("aten::mm", 120, 70, 4),
        kernel(130, 5, 334, 4), runtime(120, 0, 334, 4),
        kernel(130, 6, 335, 2), runtime(120, 0, 335, 2),
        kernel(130, 7, 336, 4), runtime(190, 0, 336, 4),
        kernel(130, 8, 337, 2), runtime(190, 0, 337, 2),
    ]
    rows = by_name(make_table(events, tmp_path))
    assert rows["aten::mat_mul"]["device_total_us"] == 5 + 6 + 7 + 8
    assert rows["aten::mat_mul"]["device_self_us"] == 6 + 8
    assert rows["aten::mm"]["device_total_us"] == 5 + 7
    assert rows["aten::mm"]["device_self_us"] == 5 + 7


@pytest.mark.parametrize("child_ts", [100, 130], ids=["same_start", "same_end"])
def test_operator_relation(tmp_path, child_ts):
    """test_operator_relation: with equal starts (or equal ends) the longer range is the parent."""
    rows = by_name(make_table([op("aten::mat_mul", 100, 100, 2),
                               op("aten::mm", child_ts, 70, 4)], tmp_path))
    assert rows["aten::mat_mul"]["host_self_us"] == 100 - 70
    assert rows["aten::mm"]["host_self_us"] == 70


def test_remove_dup_nodes(tmp_path):
    """Three nested single-child aten::mm collapse into one; the innermost's launch moves up."""
    events = [op("aten::mm", 100, 100, 2), op("aten::mm", 110, 80, 3), op("aten::mm", 120, 60, 4),
              runtime(130, 20, 335, 4), kernel(220, 8, 335, 4)]
    table = make_table(events, tmp_path)
    rows = build_operators(table)["rows"]
    assert len(rows) == 1
    assert rows[0]["calls"] == 1
    assert rows[0]["device_self_us"] == 8
    assert rows[0]["host_total_us"] == 100
    assert rows[0]["host_self_us"] == 100 - 20  # only the moved launch is subtracted
    assert len(build_op_tree(table).absorbed_rows) == 2


def test_remove_dup_discards_the_parents_own_launches(tmp_path):
    """Like torch.autograd.profiler, the collapsed parent's own runtimes are dropped."""
    events = [op("aten::mm", 100, 100, 2), op("aten::mm", 110, 80, 3),
              runtime(105, 2, 1, 2), kernel(300, 4, 1, 2),
              runtime(120, 2, 2, 3), kernel(310, 8, 2, 3)]
    rows = by_name(make_table(events, tmp_path))
    assert rows["aten::mm"]["device_self_us"] == 8


def test_dup_removal_only_merges_cpu_ops(tmp_path):
    """The reference merges "Operator"-typed nodes only: a user annotation keeps its child."""
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = [op(name, 100, 100, 2, cat="user_annotation"), op(name, 110, 80, 3, cat="cpu_op"),
              op("aten::mm", 120, 10, 4, cat="cpu_op"), op("aten::mm", 121, 5, 5, cat="cpu_op")]
    tree = build_op_tree(make_table(events, tmp_path))
    assert list(tree.names) == ["CallTreeRoot", name, name, "aten::mm"]


def test_dup_removal_needs_a_single_child(tmp_path):
    events = [op("aten::mm", 100, 100, 2), op("aten::mm", 110, 30, 3), op("aten::mm", 150, 30, 4)]
    rows = by_name(make_table(events, tmp_path))
    assert rows["aten::mm"]["calls"] == 3


def test_self_time(tmp_path):
    """test_self_time (its asserts were dead code in the reference; these are the right values):
    self host subtracts children and own runtimes, self device counts own kernels only."""
    events = [
        op("aten::mat_mul", 100, 100, 2), op("aten::mm", 120, 40, 4),
        kernel(155, 20, 334, 4), runtime(150, 10, 334, 4),
        kernel(210, 16, 335, 2), runtime(170, 25, 335, 2),
    ]
    rows = by_name(make_table(events, tmp_path))
    mat_mul, mm = rows["aten::mat_mul"], rows["aten::mm"]
    assert (mat_mul["host_total_us"], mat_mul["device_total_us"]) == (100, 20 + 16)
    assert mat_mul["host_self_us"] == 100 - 40 - 25
    assert mat_mul["device_self_us"] == 16
    assert (mm["host_total_us"], mm["device_total_us"], mm["device_self_us"]) == (40, 20, 20)
    assert mm["host_self_us"] == 40 - 10


def test_parent_owning_kernels_and_child(tmp_path):
    """Spec 3.3 vector: the parent owns kernels of 6 and 8 us, the child 5 and 7 us."""
    events = [
        op("aten::parent", 100, 100, 2), op("aten::child", 120, 70, 4),
        runtime(120, 0, 1, 4), kernel(300, 5, 1, 4), runtime(190, 0, 2, 4), kernel(310, 7, 2, 4),
        runtime(110, 0, 3, 2), kernel(320, 6, 3, 2), runtime(195, 0, 4, 2), kernel(330, 8, 4, 2),
    ]
    rows = by_name(make_table(events, tmp_path))
    assert (rows["aten::parent"]["device_total_us"], rows["aten::parent"]["device_self_us"]) == (
        26, 14)
    assert (rows["aten::child"]["device_total_us"], rows["aten::child"]["device_self_us"]) == (
        12, 12)


def test_layout_is_pre_order_with_roots(tmp_path):
    events = [op("ProfilerStep#1", 0, 100, 1, tid="1"), op("a", 10, 50, 2, tid="1"),
              op("b", 20, 10, 3, tid="1"), op("c", 40, 10, 4, tid="1"), op("d", 70, 20, 5, tid="1"),
              op("x", 5, 10, 6, tid="2"), op("y", 30, 10, 7, tid="2")]
    tree = build_op_tree(make_table(events, tmp_path))
    names = list(tree.names)
    assert names == ["CallTreeRoot", "ProfilerStep#1", "a", "b", "c", "d", "CallTreeRoot", "x",
                     "y"]
    assert list(tree.parent) == [-1, 0, 1, 2, 2, 1, -1, 6, 6]
    assert list(tree.depth) == [0, 1, 2, 3, 3, 2, 0, 1, 1]
    assert list(tree.subtree_end) == [6, 6, 5, 4, 5, 6, 9, 8, 9]
    assert tree.tids == ["1", "2"]
    assert list(tree.kind[:2]) == [NodeKind.ROOT, NodeKind.PROFILER_STEP]
    # a root spans from its first child's start to its last child's end
    assert (tree.start[6], tree.end[6]) == (5, 40)
    assert list(tree.children(1)) == [2, 5]


def test_overlap_is_clamped_not_dropped(tmp_path):
    """A child ending after its parent (float timestamps rounded to 0.25 us) is clamped into the
    parent, with its launches kept; the reference dropped it (and its runtimes)."""
    events = [op("aten::narrow", 100.0, 10.0, 2), op("aten::slice", 105.5, 4.75, 3),
              runtime(106, 1, 9, 3), kernel(120, 4, 9, 3), op("aten::next", 111, 2, 5)]
    table = make_table(events, tmp_path)
    tree = build_op_tree(table)
    assert tree.clamped == 1
    rows = by_name(table)
    assert rows["aten::slice"]["host_total_us"] == 4.5
    assert rows["aten::slice"]["device_total_us"] == 4
    assert rows["aten::narrow"]["host_self_us"] == 10 - 4.5
    assert rows["aten::narrow"]["device_total_us"] == 4
    assert tree.parent[list(tree.names).index("aten::next")] == 0  # a sibling again


def test_node_kinds(tmp_path):
    events = [
        op("ProfilerStep#3", 0, 1000, 1, cat="user_annotation"),
        op("ProfilerStep#3", 0, 1000, 1, cat="gpu_user_annotation", tid="7"),
        op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 10, 50, 2,
           cat="cpu_op"),
        op("Optimizer.step#SGD.step", 100, 50, 3, cat="user_annotation"),
        op("Optimizer.zero_grad#SGD.zero_grad", 200, 10, 4, cat="cpu_op"),
        op("nccl:all_reduce", 300, 10, 5, cat="user_annotation"),
        op("## forward ##", 400, 100, 6, cat="user_annotation"),
        op("aten::mm", 410, 10, 7, cat="cpu_op"),
        op("DistributedDataParallel.forward", 500, 100, 8, cat="cpu_op"),
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1, "tid": "456",
         "ts": 700, "dur": 50, "args": {"Python id": 3, "Python parent id": 2,
                                        "Python module id": 1}},
        {"ph": "X", "cat": "python_function", "name": "foo.py(1): f", "pid": 1, "tid": "456",
         "ts": 800, "dur": 50, "args": {"Python id": 4, "Python parent id": 2}},
    ]
    table = make_table(events, tmp_path)
    tree = build_op_tree(table)
    kinds = dict(zip(tree.names, tree.kind))
    assert tree.tids == ["456"]  # the GPU-side ProfilerStep never enters a CPU tree (bug 7.6)
    assert kinds["ProfilerStep#3"] == NodeKind.PROFILER_STEP
    assert kinds["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == (
        NodeKind.DATALOADER)
    assert kinds["Optimizer.step#SGD.step"] == NodeKind.OPTIMIZER
    assert kinds["nccl:all_reduce"] == NodeKind.USER_ANNOTATION
    assert kinds["nn.Module: Linear"] == NodeKind.MODULE
    assert "## forward ##" not in kinds and "foo.py(1): f" not in kinds
    operators = {row["name"] for row in build_operators(table)["rows"]}
    assert operators == {"aten::mm"}


def test_datapipe(tmp_path):
    """TestDataPipe: `enumerate(DataPipe)#...` is a DataLoader range, never an operator."""
    events = [op("enumerate(DataPipe)#MapperIterDataPipe", 100, 23, 2, cat="cpu_op"),
              op("aten::add", 105, 5, 3, cat="cpu_op")]
    table = make_table(events, tmp_path)
    tree = build_op_tree(table)
    node = list(tree.names).index("enumerate(DataPipe)#MapperIterDataPipe")
    assert tree.kind[node] == NodeKind.DATALOADER
    assert (tree.start[node], tree.end[node]) == (100, 123)
    assert [row["name"] for row in build_operators(table)["rows"]] == ["aten::add"]


def test_module_self_device_includes_operator_children(tmp_path):
    """ModuleNode rule: a module's self device time adds its direct operator children's totals."""
    events = [
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1, "tid": "456",
         "ts": 100, "dur": 100, "args": {"Python id": 3, "Python module id": 1,
                                         "External id": 0}},
        op("aten::linear", 110, 50, 7, cat="cpu_op"), op("aten::addmm", 120, 30, 8, cat="cpu_op"),
        runtime(125, 5, 1, 8), kernel(300, 9, 1, 8),
    ]
    tree = build_op_tree(make_table(events, tmp_path))
    module = list(tree.names).index("nn.Module: Linear")
    assert tree.device_total[module] == 9
    assert tree.device_self[module] == 9
    assert tree.device_self[list(tree.names).index("aten::linear")] == 0


def test_tree_is_memoised(tmp_path):
    table = make_table([op("aten::mm", 0, 1, 1)], tmp_path)
    assert build_op_tree(table) is build_op_tree(table)


@needs_shared
def test_ns_resolution_drops_no_op():
    """Float-ns timestamps make 63 children overshoot their parent by rounding: all are kept."""
    (path,) = glob.glob(f"{SHARED}/ns_resolution/*.json.gz")
    table = load_trace(path, use_cache=False)
    tree = build_op_tree(table)
    rows = complete_rows(table.events, tuple(Kind))
    node_events = int((node_kinds(table)[rows] >= 0).sum())
    kept = len(tree) - len(tree.roots) + len(tree.absorbed_rows)
    assert kept == node_events
    assert tree.clamped > 0
    cpu_ops = int((table.events["kind"].to_numpy() == Kind.CPU_OP).sum())
    calls = sum(row["calls"] for row in build_operators(table)["rows"])
    assert calls > 0.95 * cpu_ops


def test_tree_arrays_are_compact(tmp_path):
    """Node numbers are int32; a device statistic that is zero everywhere (a CPU-only trace)
    is a read-only zero-stride view, with the values of a real zero array."""
    cpu = build_op_tree(make_table([op("aten::mm", 0, 10, 1), op("aten::add", 2, 3, 2)],
                                   tmp_path))
    for name in ("event", "thread", "parent", "depth", "subtree_end"):
        assert getattr(cpu, name).dtype == np.int32
    for name in ("device_total", "device_self", "tc_self", "tc_total", "own_kernel_time"):
        values = getattr(cpu, name)
        assert values.strides == (0,) and not values.flags.writeable
        np.testing.assert_array_equal(values, np.zeros(len(cpu)))
    np.testing.assert_array_equal(cpu.host_total, cpu.end - cpu.start)
    gpu = build_op_tree(make_table([op("aten::mm", 0, 10, 1), runtime(1, 2, 7, 1),
                                    kernel(5, 4, 7, 1)], tmp_path))
    assert gpu.device_total.strides != (0,) and gpu.device_total.max() == 4
