"""`analysis.features` on hand-built traces: every count of `features()` is the number of events
of that kind written here, module events are Python module calls plus Lightning `[pl][module]`
annotations, operator names are distinct, sorted and cut at `MAX_OPERATOR_NAMES`, and
`summarize()` carries the parse state, messages, event count and cut-off flag."""

from __future__ import annotations

import dataclasses

from tb_plugin.analysis import features as FE
from tb_plugin.ingest.schema import ParseStatus
from tests.analysis.helpers import (
    cpu_op,
    flow,
    kernel,
    make_table,
    memcpy,
    memset,
    py,
    runtime,
    step,
)


def _mem(ts):
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100,
            "tid": 200, "ts": ts, "args": {"Device Type": 0, "Device Id": -1, "Addr": ts,
                                           "Bytes": 8, "Total Allocated": 8,
                                           "Total Reserved": 8}}


def _events():
    return [
        step(1, 0, 300),
        cpu_op("aten::mm", 10, 20, ext=1), cpu_op("aten::add", 40, 10, ext=2),
        cpu_op("aten::mm", 60, 20, ext=3), cpu_op("nccl:all_reduce", 90, 10),
        cpu_op("gloo:broadcast", 110, 10),
        runtime(12, 2, corr=1, ext=1), kernel(20, 5, corr=1, ext=1),
        runtime(42, 2, corr=2, ext=2), memcpy(50, 5, corr=2, ext=2),
        runtime(62, 2, corr=3, ext=3), memset(70, 5, corr=3, ext=3),
        runtime(64, 2, corr=4, ext=3), kernel(80, 5, corr=4, ext=3),
        py("train.py(1): f", 130, 50, python_id=1),
        py("nn.Module: Linear_0", 140, 20, python_id=2, parent=1, module=5),
        cpu_op("[pl][module]torch.nn.modules.linear.Linear: layer.0", 200, 10,
               cat="user_annotation"),
        cpu_op("[pl][module]torch.nn.modules.linear.Linear: layer.0", 220, 10,
               cat="user_annotation"),
        cpu_op("x[pl][module]not.a.module", 240, 5, cat="user_annotation"),
        cpu_op("execute_context_1(7)_generation_0(0)", 250, 20, cat="user_annotation"),
        _mem(11), _mem(12), _mem(13),
        flow("s", 1, 10), flow("f", 1, 60),
    ]


def test_features_count_each_kind(tmp_path):
    table = make_table(_events(), tmp_path, distributedInfo={"rank": 0, "world_size": 2},
                       Framework="pytorch-lightning")
    out = FE.features(table)
    assert {k: v for k, v in out.items() if k != "operator_names"} == {
        "comm_ops": 2, "module_events": 1 + 2, "events": len(_events()), "cpu_ops": 5,
        "kernels": 2, "memcpy": 1, "memset": 1, "python_functions": 2, "memory_events": 3,
        "flows": 2, "serving_steps": 1, "distributed": True,
        "framework": "pytorch-lightning"}
    assert out["operator_names"] == ["aten::add", "aten::mm", "gloo:broadcast",
                                     "nccl:all_reduce"]


def test_features_of_a_trace_without_any(tmp_path):
    out = FE.features(make_table([cpu_op("aten::add", 0, 10)], tmp_path))
    assert out == {"comm_ops": 0, "module_events": 0, "events": 1, "cpu_ops": 1, "kernels": 0,
                   "memcpy": 0, "memset": 0, "python_functions": 0, "memory_events": 0,
                   "flows": 0, "serving_steps": 0, "distributed": False, "framework": None,
                   "operator_names": ["aten::add"]}
    assert type(out["distributed"]) is bool


def test_module_events_count_python_modules_and_lightning_modules_alone(tmp_path):
    python_only = make_table([py("nn.Module: A_0", 0, 10, python_id=1, module=3),
                              py("nn.Module: A_0", 20, 10, python_id=2, module=3),
                              py("helper", 40, 10, python_id=3)], tmp_path)
    assert FE.features(python_only)["module_events"] == 2
    lightning_only = make_table([cpu_op("[pl][module]a.B: b", 0, 10, cat="user_annotation")],
                                tmp_path)
    assert FE.features(lightning_only)["module_events"] == 1
    prefix_elsewhere = make_table([cpu_op("a [pl][module]a.B: b", 0, 10,
                                          cat="user_annotation")], tmp_path)
    assert FE.features(prefix_elsewhere)["module_events"] == 0


def test_operator_names_are_distinct_sorted_and_cut(tmp_path):
    names = [f"op_{i:05d}" for i in range(FE.MAX_OPERATOR_NAMES + 1)]
    events = [cpu_op(n, float(i), 1.0) for i, n in enumerate(reversed(names))]
    events.append(cpu_op(names[0], 1e6, 1.0))
    out = FE.features(make_table(events, tmp_path))["operator_names"]
    assert out == names[:FE.MAX_OPERATOR_NAMES]
    exact = make_table([cpu_op(n, float(i), 1.0) for i, n in enumerate(
        reversed(names[:FE.MAX_OPERATOR_NAMES]))], tmp_path)
    assert FE.features(exact)["operator_names"] == names[:FE.MAX_OPERATOR_NAMES]
    kernel_names = make_table([cpu_op("aten::b", 0, 5, ext=1), runtime(1, 1, corr=1, ext=1),
                               kernel(2, 1, corr=1, ext=1, name="aten::a")], tmp_path)
    assert FE.features(kernel_names)["operator_names"] == ["aten::b"]
    # every distinct name, the empty one too (the parser's first category)
    empty = make_table([cpu_op("", 0, 1), cpu_op("b", 2, 1), cpu_op("", 4, 1)], tmp_path)
    assert FE.features(empty)["operator_names"] == ["", "b"]


def test_summarize(tmp_path):
    table = make_table(_events(), tmp_path)
    out = FE.summarize(table)
    assert list(out) == ["state", "messages", "events", "features", "cut_off"]
    assert (out["state"], out["messages"], out["events"], out["cut_off"]) == (
        "ok", [], len(_events()), False)
    assert out["features"] == FE.features(table)
    cut = dataclasses.replace(table, status=ParseStatus(state="truncated", messages=["m1"],
                                                        cut_off=True))
    summary = FE.summarize(cut)
    assert (summary["state"], summary["messages"], summary["cut_off"]) == (
        "truncated", ["m1"], True)
    assert type(summary["cut_off"]) is bool
