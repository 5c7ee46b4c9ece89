"""Module view (spec 3.13, 3.4): hierarchy, per-row stats, flame graph, backward attribution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tb_plugin.analysis.modules import backward_attribution, build_modules
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, flow, kernel, make_table, py, runtime, step

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
TRACES = SHARED_TRACES


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every row of a nested row list, by name."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out[row["name"]] = row
        out.update(by_name(row["children"]))
    return out


def test_build_module_hierarchy(tmp_path):
    """TestModuleView.test_build_module_hierarchy: 2 roots, MyModule > Linear and Conv2; the
    "nn.Module: " prefix is stripped and roots are sorted by name."""
    events = [
        py("test_root", 1, 19, 1),
        py("nn.Module: MyModule", 2, 17, 2, parent=1, module=0),
        py("nn.Module: Linear", 5, 9, 3, parent=2, module=1),
        cpu_op("aten::addmm", 10, 1),
        py("test_root2", 21, 10, 4),
        py("nn.Module: Conv2", 22, 5, 5, parent=4, module=2),
        cpu_op("aten::conv2d", 23, 2),
    ]
    out = build_modules(make_table(events, tmp_path))
    assert out["available"] and out["source"] == "python_function"
    assert [r["name"] for r in out["rows"]] == ["Conv2", "MyModule"]
    conv, mine = out["rows"]
    assert conv["children"] == []
    assert [c["name"] for c in mine["children"]] == ["Linear"]
    linear = mine["children"][0]
    assert (linear["module_id"], linear["operators"], linear["host_total_us"]) == (1, 1, 9)
    assert linear["host_self_us"] == 8
    assert mine["operators"] == 0 and mine["host_self_us"] == 17 - 9
    assert [r["key"] for r in (conv, mine, linear)] == ["0", "1", "1-0"]
    assert "message" not in out
    json.dumps(out)


def _two_steps() -> list[dict[str, Any]]:
    """Two steps; each calls Net > (Linear twice, ReLU); the Linear op launches a kernel."""
    events: list[dict[str, Any]] = []
    for s, base in enumerate((0, 1000)):
        pid = 100 * (s + 1)
        events += [
            step(s + 1, base, 900),
            py("train", base + 1, 800, pid),
            py("nn.Module: Net_0", base + 10, 300, pid + 1, parent=pid, module=0),
            py("forward", base + 11, 290, pid + 2, parent=pid + 1),
            py("nn.Module: Linear_0", base + 20, 100, pid + 3, parent=pid + 2, module=0),
            cpu_op("aten::linear", base + 25, 80, ext=pid + 10),
            runtime(base + 30, 5, corr=pid + 10, ext=pid + 10),
            kernel(base + 40, 30, corr=pid + 10, ext=pid + 10),
            py("nn.Module: Linear_0", base + 130, 50, pid + 4, parent=pid + 2, module=0),
            cpu_op("aten::linear", base + 135, 40, ext=pid + 11),
            py("nn.Module: ReLU_0", base + 200, 60, pid + 5, parent=pid + 2, module=0),
            cpu_op("aten::relu", base + 205, 20, ext=pid + 12),
            cpu_op("aten::add", base + 230, 10, ext=pid + 13),
        ]
    return events


def test_stats_occurrences_self_total_and_device(tmp_path):
    out = build_modules(make_table(_two_steps(), tmp_path))
    assert [r["name"] for r in out["rows"]] == ["Net_0"]  # the two steps' subtrees merge
    rows = by_name(out["rows"])
    net, linear, relu = rows["Net_0"], rows["Linear_0"], rows["ReLU_0"]
    assert [c["name"] for c in net["children"]] == ["Linear_0", "ReLU_0"]  # call order
    assert (net["occurrences"], linear["occurrences"], relu["occurrences"]) == (2, 4, 2)
    assert linear["operators"] == 4 and relu["operators"] == 4 and net["operators"] == 0
    assert linear["host_total_us"] == 2 * (100 + 50)
    assert linear["host_self_us"] == 2 * (100 - 80 + 50 - 40)
    assert relu["host_self_us"] == 2 * (60 - 20 - 10)
    assert net["host_total_us"] == 600
    assert net["host_self_us"] == 2 * (300 - 100 - 50 - 60)
    assert linear["device_total_us"] == 60 and net["device_total_us"] == 60
    assert linear["device_self_us"] == 60  # direct operator children's device time (3.3)
    assert net["device_self_us"] == 0
    assert linear["avg_duration_us"] == 60 / 4  # device time when there is any
    assert relu["avg_duration_us"] == 60  # else host time: 2 x 60 us over 2 calls
    assert out["has_device"] and not out["has_backward"]


def test_flamegraph_nests_totals(tmp_path):
    table = make_table(_two_steps(), tmp_path)
    flame = build_modules(table)["flamegraph"]
    assert [f["name"] for f in flame] == ["Net_0"]
    assert flame[0]["value"] == 60  # device total: the trace has device work
    assert [(c["name"], c["value"]) for c in flame[0]["children"]] == [
        ("Linear_0", 60), ("ReLU_0", 0)]
    events = [e for e in _two_steps() if e["cat"] not in ("kernel", "cuda_runtime")]
    host = build_modules(make_table(events, tmp_path))["flamegraph"][0]
    assert host["value"] == 600
    assert [c["value"] for c in host["children"]] == [300, 120]


def test_hierarchy_and_stats_disagree_degrades(tmp_path):
    """A module call without a tree node (no `dur`) is counted but its times are not: a
    message instead of the reference's KeyError (12f)."""
    events = [
        py("nn.Module: Net_0", 0, 100, 1, module=0),
        py("nn.Module: Linear_0", 10, 50, 2, parent=1, module=0),
        py("nn.Module: Broken_0", 70, None, 3, parent=1, module=0),
        cpu_op("aten::mm", 20, 10),
    ]
    out = build_modules(make_table(events, tmp_path))
    assert out["available"]
    rows = by_name(out["rows"])
    assert rows["Broken_0"]["occurrences"] == 1
    assert rows["Broken_0"]["missing_calls"] == 1
    assert rows["Broken_0"]["host_total_us"] == 0
    assert rows["Linear_0"]["host_total_us"] == 50
    assert "no node in the operator tree" in out["message"]


def test_unknown_parent_and_cycles_do_not_hang(tmp_path):
    events = [
        py("nn.Module: A_0", 0, 100, 1, parent=2, module=0),
        py("f", 10, 50, 2, parent=1),  # 1 -> 2 -> 1
        py("nn.Module: B_0", 200, 10, 3, parent=99, module=0),  # unknown parent
    ]
    out = build_modules(make_table(events, tmp_path))
    names = by_name(out["rows"])
    assert set(names) == {"A_0", "B_0"}
    assert names["B_0"]["key"] in ("0", "1")  # a root
    assert any("cycle" in w for w in out["warnings"])


def test_backward_attribution_through_nested_ops(tmp_path):
    """A flow starting on a nested op (aten::mm under aten::linear) attributes the backward op
    and the AccumulateGrad after it to the enclosing module, and to its parent's total."""
    bwd = "autograd::engine::evaluate_function: "
    events = [
        step(1, 0, 1000),
        py("nn.Module: Net_0", 10, 300, 1, module=0),
        py("nn.Module: Linear_0", 20, 100, 2, parent=1, module=0),
        cpu_op("aten::linear", 25, 80),
        cpu_op("aten::mm", 30, 60),
        flow("s", 7, 30),
        py("nn.Module: ReLU_0", 150, 50, 3, parent=1, module=0),
        cpu_op("aten::relu", 155, 20),
        flow("s", 8, 155),
        cpu_op(bwd + "ReluBackward0", 400, 40),
        cpu_op("ReluBackward0", 401, 38),
        flow("f", 8, 401),
        cpu_op(bwd + "MmBackward0", 500, 100),
        cpu_op("MmBackward0", 501, 98),
        flow("f", 7, 501),
        cpu_op(bwd + "torch::autograd::AccumulateGrad", 610, 10),
        cpu_op(bwd + "SumBackward0", 700, 5),  # no flow: unattributed
    ]
    table = make_table(events, tmp_path)
    out = build_modules(table)
    rows = by_name(out["rows"])
    assert out["has_backward"]
    assert rows["Linear_0"]["backward_host_us"] == 100 + 10
    assert rows["ReLU_0"]["backward_host_us"] == 40
    assert rows["Net_0"]["backward_host_us"] == 150
    assert out["backward"] == {"pairs": 2, "matched": 2, "attributed_ops": 3,
                               "unattributed_ops": 1}
    attribution = backward_attribution(table)
    assert len(attribution.roots) == 4


def test_lightning_modules_nest_by_dotted_name(tmp_path):
    events = [
        cpu_op("[pl][module]torch.nn.modules.container.Sequential: layer", 0, 100),
        cpu_op("[pl][module]torch.nn.modules.linear.Linear: layer.0", 10, 40),
        cpu_op("aten::linear", 15, 30),
        cpu_op("[pl][module]torch.nn.modules.activation.ReLU: layer.1", 60, 20),
        cpu_op("[pl][module]torch.nn.modules.linear.Linear: head", 120, 10),
        cpu_op("[pl][profile]run_training_batch", 0, 200),
    ]
    out = build_modules(make_table(events, tmp_path, Framework="pytorch-lightning"))
    assert out["source"] == "lightning"
    assert [r["name"] for r in out["rows"]] == ["head", "layer"]
    layer = out["rows"][1]
    assert [c["name"] for c in layer["children"]] == ["layer.0", "layer.1"]
    assert layer["children"][0]["module_type"] == "torch.nn.modules.linear.Linear"
    assert layer["children"][0]["operators"] == 1
    assert layer["host_total_us"] == 100


def test_no_module_events(tmp_path):
    out = build_modules(make_table([step(1, 0, 100), cpu_op("aten::mm", 10, 5)], tmp_path))
    assert out["available"] is False
    assert "with_modules" in out["message"]
    assert out["rows"] == [] and out["flamegraph"] == []


def test_cnn_sample_module_tree():
    path = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]
    out = build_modules(load_trace(str(path), use_cache=False))
    assert out["available"] and out["has_backward"]
    rows = by_name(out["rows"])
    assert [r["name"] for r in out["rows"]] == ["CrossEntropyLoss_0", "SmallCNN_0"]
    for name in ("Sequential_0", "Conv2d_0", "Conv2d_1", "BatchNorm2d_0", "ReLU_0",
                 "MaxPool2d_0", "Linear_0", "Dropout_0"):
        assert rows[name]["occurrences"] == 2  # two profiled steps
    assert rows["Conv2d_0"]["operators"] == 2  # aten::conv2d per call
    for row in rows.values():
        assert sum(c["host_total_us"] for c in row["children"]) <= row["host_total_us"]
        assert 0 < row["host_self_us"] <= row["host_total_us"]
    cnn = rows["SmallCNN_0"]
    assert cnn["backward_host_us"] > 0
    assert out["backward"]["unattributed_ops"] == 0
    assert out["flamegraph"][1]["value"] == cnn["host_total_us"]


@needs_shared
def test_pytorch19_trace_has_no_modules():
    path = sorted((TRACES / "resnet50_gpu_pt19").glob("*.pt.trace.json*"))[0]
    out = build_modules(load_trace(str(path), use_cache=False))
    assert out["available"] is False and out["message"]


def test_every_row_number_is_rounded_to_3_decimals(tmp_path):
    """Fractional times: each value is the hand-derived sum rounded to 3 decimals (not 4, not
    to an integer)."""
    bwd = "autograd::engine::evaluate_function: "
    events = [
        step(1, 0, 1000),
        py("nn.Module: Net_0", 10, 300.56789, 1, module=0),
        py("nn.Module: Linear_0", 20, 100.5, 2, parent=1, module=0),
        cpu_op("aten::linear", 25, 80.37654, ext=10),
        runtime(30, 5, corr=10, ext=10),
        kernel(40, 30.12345, corr=10, ext=10),
        flow("s", 7, 25),
        cpu_op(bwd + "MmBackward0", 400, 40.12345),
        cpu_op("MmBackward0", 401, 38.5),
        flow("f", 7, 401),
        runtime(410, 5, corr=20, ext=20),
        kernel(420, 20.98765, corr=20, ext=20),
    ]
    rows = by_name(build_modules(make_table(events, tmp_path))["rows"])
    net, linear = rows["Net_0"], rows["Linear_0"]
    assert linear["host_total_us"] == 100.5
    assert linear["host_self_us"] == 20.123  # 100.5 - 80.37654 = 20.12346
    assert linear["device_total_us"] == linear["device_self_us"] == 30.123  # 30.12345
    assert linear["avg_duration_us"] == 30.123
    assert linear["backward_host_us"] == net["backward_host_us"] == 40.123  # 40.12345
    assert linear["backward_device_us"] == net["backward_device_us"] == 20.988  # 20.98765
    assert net["host_total_us"] == 300.568  # 300.56789
    assert net["host_self_us"] == 200.068  # 300.56789 - 100.5 = 200.06789
    assert net["device_total_us"] == 30.123 and net["device_self_us"] == 0


def test_a_cycle_of_plain_calls_makes_the_modules_under_it_roots(tmp_path):
    events = [
        py("f", 0, 100, 1, parent=2),  # 1 -> 2 -> 1, neither a module
        py("g", 5, 90, 2, parent=1),
        py("nn.Module: M_0", 10, 20, 3, parent=1, module=0),
        py("nn.Module: N_0", 40, 10, 4, parent=3, module=0),
    ]
    out = build_modules(make_table(events, tmp_path))
    assert [r["name"] for r in out["rows"]] == ["M_0"]  # a root, with N_0 below it
    assert [c["name"] for c in out["rows"][0]["children"]] == ["N_0"]
    assert "The Python parent ids form a cycle; the modules on it are shown as roots." \
        in out["warnings"]


def test_repeated_python_ids_use_the_first_call(tmp_path):
    events = [
        py("nn.Module: A_0", 0, 100, 1, module=0),
        py("nn.Module: B_0", 200, 100, 1, module=0),  # the same id again
        py("nn.Module: C_0", 10, 20, 2, parent=1, module=0),
    ]
    out = build_modules(make_table(events, tmp_path))
    assert "Some Python ids repeat; the first call with each id is used." in out["warnings"]
    rows = by_name(out["rows"])
    assert [c["name"] for c in rows["A_0"]["children"]] == ["C_0"]
    assert rows["B_0"]["children"] == []
