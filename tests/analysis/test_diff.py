"""Diff run (spec 3.14): every thread's trees, anchor alignment, composites, paths, op deltas,
one basis (per step or total) for every number of a payload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.diff.kernels import build_diff_kernels
from tb_plugin.analysis.diff.side import merged_ranges
from tb_plugin.analysis.diff.tree import UnknownDiffPathError, build_diff
from tb_plugin.ingest.schema import Kind
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, flow, make_table, py, step

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
TRACES = SHARED_TRACES
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
OPTIMIZER = "Optimizer.step#SGD.step"
BWD = "autograd::engine::evaluate_function: "


def module(name: str, ts: float, dur: float, python_id: int) -> dict[str, Any]:
    return py(f"nn.Module: {name}", ts, dur, python_id, module=0)


def base_events() -> list[dict[str, Any]]:
    return [
        step(1, 0, 1000),
        cpu_op(LOADER, 10, 50),
        module("A_0", 100, 300, 1),
        cpu_op("aten::linear", 110, 190), cpu_op("aten::mm", 120, 160),
        cpu_op("aten::relu", 310, 40),
        cpu_op("aten::add", 450, 20), cpu_op("aten::mul", 480, 40),
        cpu_op(OPTIMIZER, 600, 100), cpu_op("aten::add_", 610, 10),
    ]


def exp_events() -> list[dict[str, Any]]:
    return [
        step(1, 0, 1000),
        cpu_op(LOADER, 10, 30),
        module("A_0", 100, 200, 1),
        cpu_op("aten::linear", 110, 140), cpu_op("aten::mm", 115, 125),
        cpu_op("aten::relu", 260, 30),
        cpu_op("aten::mul", 350, 30), cpu_op("aten::add", 390, 10), cpu_op("aten::sub", 410, 20),
        cpu_op(OPTIMIZER, 500, 150), cpu_op("aten::add_", 510, 20),
    ]


@pytest.fixture
def pair(tmp_path):
    return make_table(base_events(), tmp_path), make_table(exp_events(), tmp_path)


def names(node: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["left"]["name"], c["right"]["name"]) for c in node["children"]]


def test_anchors_align_and_composites_fill_the_gaps(pair):
    root = build_diff(*pair)
    assert root["path"] == "0" and root["per_step"]
    assert names(root) == [(LOADER, LOADER), ("nn.Module: A_0", "nn.Module: A_0"),
                           ("CompositeNodes", "CompositeNodes"), (OPTIMIZER, OPTIMIZER)]
    assert [c["path"] for c in root["children"]] == ["0-0", "0-1", "0-2", "0-3"]
    loader, mod, composite, _ = root["children"]
    assert (loader["left"]["type"], mod["left"]["type"]) == ("dataloader", "module")
    assert (mod["left"]["host_duration_us"], mod["right"]["host_duration_us"]) == (300, 200)
    assert mod["delta"]["total_duration_us"] == -100
    assert (composite["left"]["count"], composite["right"]["count"]) == (2, 3)
    assert composite["left"]["host_duration_us"] == 60
    assert composite["right"]["host_duration_us"] == 60
    assert not loader["expandable"] and mod["expandable"] and composite["expandable"]
    assert root["left"]["host_duration_us"] == 50 + 300 + 60 + 100
    assert root["base"] == {"tid": "200", "steps": 1}
    assert (root["left"]["name"], root["left"]["type"]) == ("CallTreeRoot", "root")


def test_composite_drill_down_pairs_any_equal_names(pair):
    node = build_diff(*pair, path="0-2")
    assert node["left"]["type"] == "composite"
    assert names(node) == [("Blank", "aten::mul"), ("aten::add", "aten::add"),
                           ("aten::mul", "aten::sub")]
    blank = node["children"][0]
    assert blank["left"]["type"] == "blank" and blank["left"]["count"] == 0
    assert blank["delta"]["host_duration_us"] == 30


def test_path_drill_down_into_module(pair):
    node = build_diff(*pair, path="0-1")
    assert names(node) == [("aten::linear", "aten::linear"), ("aten::relu", "aten::relu")]
    deeper = build_diff(*pair, path="0-1-0")
    assert names(deeper) == [("aten::mm", "aten::mm")]
    assert deeper["children"][0]["delta"]["host_duration_us"] == 125 - 160
    assert deeper["basis"] == "per_step" and deeper["per_step"]  # one step: equal to totals
    leaf = build_diff(*pair, path="0-1-0-0")
    assert leaf["children"] == []


@pytest.mark.parametrize("path", ["0-4", "0-1-7", "0-1-0-0-0", "1", "", "0-x", "0--1", "x"])
def test_unknown_path_raises_a_key_error(pair, path):
    with pytest.raises(UnknownDiffPathError) as info:
        build_diff(*pair, path=path)
    assert isinstance(info.value, KeyError)


def test_operator_deltas_sorted_by_absolute_delta(pair):
    rows = build_diff(*pair)["operator_deltas"]
    assert [r["name"] for r in rows] == [
        "aten::linear", "aten::mm", "aten::sub", "aten::add", "aten::add_", "aten::mul",
        "aten::relu"]
    by = {r["name"]: r for r in rows}
    assert (by["aten::linear"]["base_host_total_us"], by["aten::linear"]["exp_host_total_us"],
            by["aten::linear"]["delta_host_total_us"]) == (190, 140, -50)
    assert (by["aten::sub"]["base_calls"], by["aten::sub"]["exp_calls"]) == (0, 1)
    assert by["aten::mm"]["delta_host_self_us"] == 125 - 160
    assert by["aten::linear"]["delta_host_self_us"] == (140 - 125) - (190 - 160)
    assert build_diff(*pair)["operator_sort"] == "delta_host_total_us"
    module_rows = build_diff(*pair, path="0-1")["operator_deltas"]
    assert {r["name"] for r in module_rows} == {"aten::linear", "aten::mm", "aten::relu"}


def _steps(count: int, loader_us: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(count):
        base = 1000 * i
        events += [step(i + 1, base, 900), cpu_op(LOADER, base + 10, loader_us),
                   module("A_0", base + 200, 100, i + 1), cpu_op("aten::mm", base + 210, 50)]
    return events


def test_different_step_counts_compare_per_step_averages(tmp_path):
    """Each step holds one loader (100 us in the base's 2 steps, 40 us in the experiment's 3)
    and one module A_0 (100 us): the top level folds the steps, so each child is one loader
    and one module per step, on either basis."""
    base, exp = make_table(_steps(2, 100), tmp_path), make_table(_steps(3, 40), tmp_path)
    root = build_diff(base, exp)
    assert root["per_step"]
    assert (root["base"]["steps"], root["exp"]["steps"]) == (2, 3)
    assert root["left"]["host_duration_us"] == 100 + 100
    assert root["right"]["host_duration_us"] == 40 + 100
    mm = next(r for r in root["operator_deltas"] if r["name"] == "aten::mm")
    assert (mm["base_calls"], mm["exp_calls"], mm["delta_host_total_us"]) == (1, 1, 0)
    assert names(root) == [(LOADER, LOADER), ("nn.Module: A_0", "nn.Module: A_0")]
    loader, mod = root["children"]
    assert (loader["left"]["host_duration_us"], loader["right"]["host_duration_us"]) == (
        100, 40)
    assert (mod["left"]["host_duration_us"], mod["right"]["host_duration_us"]) == (100, 100)
    assert _sums(root, "left", "host_duration_us") == root["left"]["host_duration_us"]
    total = build_diff(base, exp, basis="total")
    assert total["basis"] == "total" and not total["per_step"]
    assert total["left"]["host_duration_us"] == 2 * (100 + 100)
    assert total["right"]["host_duration_us"] == 3 * (40 + 100)
    assert total["children"][0]["delta"]["host_duration_us"] == 3 * 40 - 2 * 100
    mm = next(r for r in total["operator_deltas"] if r["name"] == "aten::mm")
    assert (mm["base_calls"], mm["exp_calls"], mm["delta_host_total_us"]) == (2, 3, 50)


def test_a_child_listed_in_every_step_shows_its_time_per_step(tmp_path):
    """Per path: A_0 runs once per step (100 us in step 1, 300 us in step 2): per step it is
    (100 + 300) / 2 = 200 us, not 50 and 150 as two occurrences divided by the step count;
    its child aten::mm (50 us in each) is 50 per step. A step's second call of the same key
    is a fold of its own (the k-th call of each step)."""
    events = []
    for i, (base, dur) in enumerate(((0, 100), (1000, 300))):
        events += [step(i + 1, base, 900), module("A_0", base + 100, dur, i + 1),
                   cpu_op("aten::mm", base + 110, 50),
                   cpu_op("aten::add", base + 500, 10), cpu_op("aten::add", base + 600, 30)]
    table = make_table(events, tmp_path)
    root = build_diff(table, table)
    assert names(root) == [("nn.Module: A_0", "nn.Module: A_0"),
                           ("CompositeNodes", "CompositeNodes")]
    mod, adds = root["children"]
    assert mod["left"]["host_duration_us"] == 200 and mod["left"]["count"] == 1
    assert adds["left"]["host_duration_us"] == 40 and adds["left"]["count"] == 2
    assert [c["left"]["host_duration_us"] for c in build_diff(table, table, "0-1")[
        "children"]] == [10, 30]
    inner = build_diff(table, table, "0-0")
    assert [c["left"]["host_duration_us"] for c in inner["children"]] == [50]
    total = build_diff(table, table, "0-0", basis="total")
    assert total["left"]["host_duration_us"] == 400
    assert [c["left"]["host_duration_us"] for c in total["children"]] == [100]


def test_main_thread_is_the_step_thread_not_the_first(tmp_path):
    events = [cpu_op("aten::long_op", 0, 5000, tid=300), *_steps(1, 100)]
    root = build_diff(make_table(events, tmp_path), make_table(events, tmp_path))
    assert root["base"]["tid"] == "200"
    assert names(root)[0] == (LOADER, LOADER)  # the top level is the step thread's
    assert names(root)[-1] == ("thread 2", "thread 2")  # the other thread, compared too
    assert "aten::long_op" in {r["name"] for r in root["operator_deltas"]}


def test_without_steps_the_longest_forward_thread_is_used(tmp_path):
    events = [cpu_op(BWD + "MmBackward0", 0, 9000, tid=300), cpu_op("aten::mm", 10, 50),
              cpu_op("aten::add", 100, 5000)]
    root = build_diff(make_table(events, tmp_path), make_table(events, tmp_path))
    assert root["base"]["tid"] == "200" and not root["per_step"]
    assert names(root) == [("aten::mm", "aten::mm"), ("aten::add", "aten::add"),
                           ("autograd thread", "autograd thread")]


def _backward_events() -> list[dict[str, Any]]:
    return [
        step(1, 0, 1000),
        py("nn.Module: Net_0", 10, 300, 1, module=0),
        py("nn.Module: Linear_0", 20, 100, 2, parent=1, module=0),
        cpu_op("aten::linear", 25, 80), cpu_op("aten::mm", 30, 60), flow("s", 7, 30),
        py("nn.Module: ReLU_0", 150, 50, 3, parent=1, module=0),
        cpu_op("aten::relu", 155, 20), flow("s", 8, 155),
        cpu_op(BWD + "ReluBackward0", 400, 40), cpu_op("ReluBackward0", 401, 38),
        flow("f", 8, 401),
        cpu_op(BWD + "MmBackward0", 500, 100), cpu_op("MmBackward0", 501, 98),
        flow("f", 7, 501),
        cpu_op(BWD + "torch::autograd::AccumulateGrad", 610, 10),
        cpu_op(BWD + "SumBackward0", 700, 5),
    ]


def test_backward_nodes_are_anchors(tmp_path):
    table = make_table(_backward_events(), tmp_path)
    root = build_diff(table, table)
    assert names(root) == [("nn.Module: Net_0", "nn.Module: Net_0"),
                           ("nn.Module: Net_0.backward", "nn.Module: Net_0.backward"),
                           (BWD + "SumBackward0", BWD + "SumBackward0")]
    backward = root["children"][1]
    assert backward["left"]["type"] == "backward"
    assert backward["left"]["host_duration_us"] == 40 + 100 + 10
    node = build_diff(table, table, "0-1")
    assert names(node) == [("nn.Module: ReLU_0.backward", "nn.Module: ReLU_0.backward"),
                           ("nn.Module: Linear_0.backward", "nn.Module: Linear_0.backward")]
    linear = build_diff(table, table, "0-1-1")
    assert names(linear) == [(BWD + "MmBackward0", BWD + "MmBackward0"),
                             (BWD + "torch::autograd::AccumulateGrad",
                              BWD + "torch::autograd::AccumulateGrad")]
    ops = {r["name"] for r in node["operator_deltas"]}
    assert "MmBackward0" in ops and "aten::mm" not in ops


def _sample(run: str) -> Any:
    return load_trace(str(sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))[0]),
                      use_cache=False)


def test_cnn_batch_sizes_align_and_differ():
    base, exp = _sample("cnn_bs32"), _sample("cnn_bs64")
    root = build_diff(base, exp)
    children = root["children"]
    assert root["per_step"] and root["base"]["steps"] == root["exp"]["steps"] == 2
    assert len(children) == 7  # one step, folded: loader, model, loss, ones_like, 2 backward,
    # step
    assert all(c["left"]["name"] == c["right"]["name"] for c in children)
    assert all(c["left"]["count"] == c["right"]["count"] == 1 for c in children)
    kinds = [c["left"]["type"] for c in children[:7]]
    assert kinds == ["dataloader", "module", "module", "operator", "backward", "backward",
                     "optimizer"]
    assert any(c["delta"]["host_duration_us"] != 0 for c in children)
    rows = root["operator_deltas"]
    deltas = [abs(r["delta_host_total_us"]) for r in rows]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0
    model = build_diff(base, exp, "0-1")
    assert names(model)[0] == ("nn.Module: Sequential_0", "nn.Module: Sequential_0")


@needs_shared
def test_resnet50_spans_align_on_loader_and_optimizer():
    files = sorted((TRACES / "resnet50_gpu_pt19").glob("*.pt.trace.json*"))
    base, exp = (load_trace(str(f), use_cache=False) for f in files[:2])
    root = build_diff(base, exp)
    assert root["base"]["steps"] == root["exp"]["steps"] == 6
    # 24 on the main thread (4 per step, folded across the 6 steps), the autograd thread's node
    assert len(root["children"]) == 5
    assert root["children"][-1]["left"]["type"] == "thread"
    anchors = [c for c in root["children"] if c["left"]["type"] in ("dataloader", "optimizer")]
    assert len(anchors) == 2
    assert all(c["left"]["name"] == c["right"]["name"] for c in anchors)
    assert root["operator_sort"] == "delta_device_total_us"
    assert root["left"]["device_duration_us"] > 0


def _threads_events() -> list[dict[str, Any]]:
    """A step on the main thread (200); backward ops on another thread (300) that no module
    owns (no fwdbwd flows), and a data-loading thread (400)."""
    return [
        step(1, 0, 1000), cpu_op("aten::mm", 10, 100),
        cpu_op(BWD + "MmBackward0", 200, 300, tid=300), cpu_op("MmBackward0", 210, 250, tid=300),
        cpu_op(BWD + "AddBackward0", 600, 50, tid=300),
        cpu_op("aten::copy_", 50, 70, tid=400),
    ]


def test_every_thread_is_compared(tmp_path):
    base = make_table(_threads_events(), tmp_path)
    exp_events = _threads_events()
    exp_events[2] = cpu_op(BWD + "MmBackward0", 200, 200, tid=300)
    exp_events[3] = cpu_op("MmBackward0", 210, 150, tid=300)
    root = build_diff(base, make_table(exp_events, tmp_path))
    assert names(root) == [("aten::mm", "aten::mm"), ("thread 2", "thread 2"),
                           ("autograd thread", "autograd thread")]
    loader, autograd = root["children"][1], root["children"][2]
    assert loader["left"]["host_duration_us"] == 70 and loader["delta"]["host_duration_us"] == 0
    assert autograd["left"]["type"] == "thread"
    assert (autograd["left"]["host_duration_us"], autograd["right"]["host_duration_us"]) == (
        300 + 50, 200 + 50)
    assert root["left"]["host_duration_us"] == 100 + 70 + 350  # the headline counts them all
    assert root["delta"]["host_duration_us"] == -100
    mm_backward = next(r for r in root["operator_deltas"] if r["name"] == "MmBackward0")
    assert mm_backward["delta_host_total_us"] == 150 - 250
    inside = build_diff(base, base, "0-2")
    assert names(inside) == [(BWD + "MmBackward0", BWD + "MmBackward0"),
                             (BWD + "AddBackward0", BWD + "AddBackward0")]


def _sums(node: dict[str, Any], side: str, key: str) -> float:
    return sum(child[side][key] for child in node["children"])


@pytest.mark.parametrize("basis", ["per_step", "total"])
def test_the_headline_is_the_sum_of_its_children_on_one_basis(basis):
    base, exp = _sample("cnn_bs32"), _sample("cnn_bs64")
    root = build_diff(base, exp, basis=basis)
    assert root["basis"] == basis
    for side in ("left", "right"):
        for key in ("host_duration_us", "device_duration_us", "total_duration_us"):
            assert _sums(root, side, key) == pytest.approx(
                root[side][key], abs=1e-3 * len(root["children"]))
    model = build_diff(base, exp, "0-1", basis=basis)  # a module: its children and own time
    scale = 2 if basis == "per_step" else 1
    assert model["left"]["host_duration_us"] == pytest.approx(
        root["children"][1]["left"]["host_duration_us"], abs=1e-3)
    assert _sums(model, "left", "host_duration_us") < model["left"]["host_duration_us"]
    assert model["left"]["host_duration_us"] * scale == pytest.approx(
        build_diff(base, exp, "0-1", basis="total")["left"]["host_duration_us"], abs=2e-3)


@needs_shared
def test_resnet50_counts_the_autograd_threads_kernels():
    """Brute-force oracle: with every thread compared, the root's device time is every kernel,
    memcpy and memset of the span (resnet50's autograd thread launches 36 ms of them a step)."""
    files = sorted((TRACES / "resnet50_gpu_pt19").glob("*.pt.trace.json*"))
    base, exp = (load_trace(str(f), use_cache=False) for f in files[:2])
    root = build_diff(base, exp, basis="total")
    for table, side in ((base, "left"), (exp, "right")):
        kinds = table.events["kind"].to_numpy()
        device = np.isin(kinds, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET))
        assert root[side]["device_duration_us"] == pytest.approx(
            table.events["dur"].to_numpy()[device].sum(), abs=1e-3)
    per_step = build_diff(base, exp)
    assert per_step["left"]["device_duration_us"] == pytest.approx(
        root["left"]["device_duration_us"] / 6, abs=1e-3)


def _verdict_steps(module_us: list[float]) -> list[dict[str, Any]]:
    """One step per value: a 100 us loader, then the module A_0 of that many us."""
    events = []
    for i, dur in enumerate(module_us):
        base = i * 1000
        events += [step(i + 1, base, 900), cpu_op(LOADER, base + 10, 100),
                   module("A_0", base + 200, dur, i + 1)]
    return events


def test_verdict_floor_is_strict_on_the_per_step_time(tmp_path):
    """Per step the base's top-level time is 100 + 300 = 400 us, so the floor is 1% of it,
    4 us. Constant steps make every interval a point: +4 us is within noise, +4.5 us is not."""
    base = make_table(_verdict_steps([300, 300, 300]), tmp_path)
    at_floor = build_diff(base, make_table(_verdict_steps([304] * 3), tmp_path))
    assert at_floor["verdict"]["floor_us"] == 4.0
    mod = at_floor["children"][1]
    assert mod["interval"] == {"delta_us": 4.0, "low_us": 4.0, "high_us": 4.0,
                               "verdict": "unchanged"}
    assert at_floor["children"][0]["interval"]["verdict"] == "unchanged"  # the loader: 0
    above = build_diff(base, make_table(_verdict_steps([304.5] * 3), tmp_path))
    assert above["children"][1]["interval"]["verdict"] == "regressed"
    assert above["verdict"]["verdict"] == "regressed" and above["verdict"]["delta_us"] == 4.5
    assert above["verdict"]["relative"] == round(4.5 / 400, 5)
    faster = build_diff(base, make_table(_verdict_steps([295.5] * 3), tmp_path))
    assert faster["children"][1]["interval"]["verdict"] == "improved"
    assert faster["verdict"]["over"] == "steps" and "steps only" in faster["verdict"]["note"]


def test_verdict_interval_comes_from_the_steps(tmp_path):
    """The experiment's module takes 300 or 400 us in its two steps: its per-step mean
    resamples to 300 (1/4), 350 (1/2), 400 (1/4), so the 95% interval of the delta is
    [0, 100] around 50: within noise, although the mean moved by 50."""
    base = make_table(_verdict_steps([300, 300]), tmp_path)
    out = build_diff(base, make_table(_verdict_steps([300, 400]), tmp_path))
    assert out["children"][1]["interval"] == {"delta_us": 50.0, "low_us": 0.0,
                                              "high_us": 100.0, "verdict": "unchanged"}
    inside = build_diff(base, make_table(_verdict_steps([300, 400]), tmp_path), "0-1")
    assert inside["verdict"]["delta_us"] == 50.0


def test_no_verdict_without_steps(tmp_path):
    events = [cpu_op("aten::mm", 10, 100)]
    out = build_diff(make_table(events, tmp_path), make_table(events, tmp_path))
    assert out["verdict"] is None
    assert all(c["interval"] is None for c in out["children"])


def test_an_operator_missing_on_one_side_faces_a_blank_and_times_round_to_3(tmp_path):
    # no anchors: the any-key pass pairs aten::add; aten::div has no partner on the right
    base = make_table([step(1, 0, 1000), cpu_op("aten::div", 100, 10.12345),
                       cpu_op("aten::add", 200, 20.5)], tmp_path)
    exp = make_table([step(1, 0, 1000), cpu_op("aten::add", 200, 30.25)], tmp_path)
    root = build_diff(base, exp)
    assert names(root) == [("aten::div", "Blank"), ("aten::add", "aten::add")]
    div, add = root["children"]
    assert div["left"] == {"name": "aten::div", "type": "operator", "count": 1,
                           "host_duration_us": 10.123, "device_duration_us": 0,
                           "total_duration_us": 10.123}
    assert div["right"]["count"] == 0 and div["delta"]["host_duration_us"] == -10.123
    assert add["delta"] == {"host_duration_us": 9.75, "device_duration_us": 0,
                            "total_duration_us": 9.75}
    assert root["left"]["host_duration_us"] == 30.623  # 10.12345 + 20.5
    # the other way round: the right's extra operator faces a blank on the left
    assert names(build_diff(exp, base)) == [("Blank", "aten::div"), ("aten::add", "aten::add")]


@pytest.mark.parametrize(("ranges", "expected"), [
    ([], ([], [])),
    ([(3, 5)], ([3], [5])),
    ([(0, 3), (2, 5)], ([0], [5])),             # overlapping: one
    ([(0, 2), (2, 4)], ([0, 2], [2, 4])),       # touching half-open ranges stay apart
    ([(0, 2), (3, 4)], ([0, 3], [2, 4])),
    ([(5, 12), (0, 10), (2, 3)], ([0], [12])),  # unsorted, one nested in another
    ([(0, 10), (2, 3), (4, 6), (10, 11)], ([0, 10], [10, 11])),  # a nested one ends early
])
def test_merged_ranges(ranges, expected):
    lo, hi = merged_ranges(np.asarray(ranges, dtype=np.int64).reshape(-1, 2))
    assert (lo.tolist(), hi.tolist()) == expected
    assert lo.shape == hi.shape == (len(expected[0]),)


def test_bad_basis_and_group_by_are_refused(pair):
    with pytest.raises(ValueError, match="unknown diff basis 'steps'; expected one of "):
        build_diff(*pair, basis="steps")
    with pytest.raises(ValueError, match="unknown group_by 'op'; expected one of kernel"):
        build_diff_kernels(*pair, group_by="op")


def test_a_trace_without_operators_faces_blanks(tmp_path):
    full = make_table(base_events(), tmp_path)
    empty = make_table([{"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 0,
                         "cat": "user"}], tmp_path)
    root = build_diff(full, empty)
    assert not root["per_step"] and root["base"]["steps"] == 1 and root["exp"]["steps"] == 0
    assert root["right"]["count"] == 0 and root["right"]["host_duration_us"] == 0
    # the step's 5 children (loader 50, module 300, add 20, mul 40, optimizer 100) have no
    # partner: one composite against a blank
    assert names(root) == [("CompositeNodes", "Blank")]
    composite = root["children"][0]["left"]
    assert (composite["count"], composite["host_duration_us"]) == (5, 50 + 300 + 20 + 40 + 100)
    assert root["left"]["host_duration_us"] == 510


def test_operator_deltas_per_step_are_rounded_means_with_ties_by_name(tmp_path):
    # 3 steps each side; base: aten::mm once (10 us) in step 1 and aten::b 5 us in each step;
    # exp: aten::mm 10 us in every step and aten::a 5 us in each step
    def trace(mm_steps: int, other: str) -> list[dict[str, Any]]:
        events = []
        for s in range(3):
            events += [step(s + 1, 1000 * s, 900), cpu_op(other, 1000 * s + 500, 5)]
            if s < mm_steps:
                events.append(cpu_op("aten::mm", 1000 * s + 100, 10))
        return events

    root = build_diff(make_table(trace(1, "aten::b"), tmp_path),
                      make_table(trace(3, "aten::a"), tmp_path))
    assert root["operator_sort"] == "delta_host_total_us"
    rows = root["operator_deltas"]
    # |delta| 6.667 (mm), then 5 and -5: a tie, by name (a before b)
    assert [r["name"] for r in rows] == ["aten::mm", "aten::a", "aten::b"]
    mm = rows[0]
    assert (mm["base_calls"], mm["exp_calls"], mm["delta_calls"]) == (0.333, 1.0, 0.667)
    assert (mm["base_host_total_us"], mm["exp_host_total_us"], mm["delta_host_total_us"]) == (
        3.333, 10.0, 6.667)  # 10 / 3 per step
    assert (rows[1]["delta_host_total_us"], rows[2]["delta_host_total_us"]) == (5.0, -5.0)
    # on the total basis: plain counts, as ints
    total = build_diff(make_table(trace(1, "aten::b"), tmp_path),
                       make_table(trace(3, "aten::a"), tmp_path), basis="total")
    mm = total["operator_deltas"][0]
    assert (mm["name"], mm["base_calls"], mm["exp_calls"], mm["delta_host_total_us"]) == (
        "aten::mm", 1, 3, 20.0)
    assert type(mm["base_calls"]) is int


def test_verdict_numbers_round_to_3_and_relative_to_5_decimals(tmp_path):
    base = make_table(_verdict_steps([300, 300, 300]), tmp_path)
    exp = make_table(_verdict_steps([304.1234] * 3), tmp_path)
    verdict = build_diff(base, exp)["verdict"]
    assert (verdict["delta_us"], verdict["low_us"], verdict["high_us"]) == (4.123, 4.123, 4.123)
    assert verdict["relative"] == 0.01031  # 4.1234 / 400 = 0.0103085
    assert verdict["floor_us"] == 4.0 and verdict["min_change"] == 0.01
    assert verdict["verdict"] == "regressed" and verdict["confidence"] == 0.95
