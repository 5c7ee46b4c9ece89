"""The per-step summaries `torch-prof compare` works from (analysis/compare/summary.py) on
hand-built traces, and the baseline store (baseline_store.py) on local folders and fsspec
URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_plugin.analysis.compare.summary import SUMMARY_VERSION, step_summary, user_frames
from tb_plugin.baseline_store import (
    BaselineError,
    list_baselines,
    load_baseline,
    save_baseline,
)
from tests.analysis.test_compare_stats import summary as fake_summary

from .helpers import cpu_op, kernel, make_table, py, runtime, step


def _trace(tmp_path: Path):
    """Two steps [0, 900) and [1000, 1900): aten::mm 50 us in step 1, twice (50 + 30) in
    step 2, aten::add 20 us in step 2 only; an aten::mm at 950 us lies between the steps."""
    return make_table([
        step(1, 0, 900), cpu_op("aten::mm", 100, 50),
        cpu_op("aten::mm", 950, 40),
        step(2, 1000, 900), cpu_op("aten::mm", 1100, 50), cpu_op("aten::mm", 1300, 30),
        cpu_op("aten::add", 1500, 20),
    ], tmp_path)


def test_operator_self_time_per_step_by_start(tmp_path: Path) -> None:
    out = step_summary(_trace(tmp_path))
    assert out["version"] == SUMMARY_VERSION and out["steps"] == ["1", "2"]
    assert out["metrics"]["operator:aten::mm"] == [50.0, 80.0]  # the one at 950 is in none
    assert out["metrics"]["operator:aten::add"] == [0.0, 20.0]
    assert out["metrics"]["step:Total"] == [900.0, 900.0]
    assert out["device"] == "CPU" and out["modules"] == []
    assert out["operators"] == ["aten::add", "aten::mm"]
    assert out["state"] == "ok" and out["messages"] == []


def test_op_categories_sum_their_operators(tmp_path: Path) -> None:
    metrics = step_summary(_trace(tmp_path))["metrics"]
    categories = {k: v for k, v in metrics.items() if k.startswith("op_category:")}
    totals = [sum(v[i] for v in categories.values()) for i in range(2)]
    assert totals == [50.0, 100.0]
    assert metrics["op_category:GEMM"] == [50.0, 80.0]
    assert metrics["op_category:elementwise"] == [0.0, 20.0]


def test_step_categories_fill_the_step(tmp_path: Path) -> None:
    metrics = step_summary(_trace(tmp_path))["metrics"]
    parts = [v for k, v in metrics.items() if k.startswith("step:") and k != "step:Total"]
    assert [sum(p[i] for p in parts) for i in range(2)] == metrics["step:Total"]
    assert metrics["step:CPU Exec"] == [50.0, 100.0]


def test_baseline_round_trip_on_a_folder_and_a_memory_url(tmp_path: Path) -> None:
    runs = [[fake_summary(100.0, {"aten::mm": 10.0})]]
    for store in (str(tmp_path / "store"), "memory://torch-prof-test/baselines"):
        save_baseline(store, "main", runs, "logs")
        data = load_baseline(store, "main")
        assert data["runs"] == runs and data["source"] == "logs" and data["version"] == 1
        assert list_baselines(store) == ["main"]
    assert not list((tmp_path / "store").glob("*.partial"))


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a/b", "../up", "x" * 129])
def test_bad_baseline_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(BaselineError, match="bad baseline name"):
        save_baseline(str(tmp_path), name, [], "logs")


def test_longest_and_dotted_names_are_taken(tmp_path: Path) -> None:
    for name in ("x" * 128, "v1.2_main-branch"):
        save_baseline(str(tmp_path), name, [], "logs")
        assert load_baseline(str(tmp_path), name)["name"] == name


def test_foreign_or_old_baselines_say_why(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"format": "something"}))
    with pytest.raises(BaselineError, match="is not a torch-prof baseline"):
        load_baseline(str(tmp_path), "other")
    (tmp_path / "old.json").write_text(json.dumps(
        {"format": "torch-prof-baseline", "version": 0, "runs": []}))
    with pytest.raises(BaselineError, match="has version 0.*save it again"):
        load_baseline(str(tmp_path), "old")
    stale = fake_summary(1.0, {})
    stale["version"] = SUMMARY_VERSION + 1
    (tmp_path / "stale.json").write_text(json.dumps(
        {"format": "torch-prof-baseline", "version": 1, "runs": [[stale]]}))
    with pytest.raises(BaselineError, match="summaries of another version"):
        load_baseline(str(tmp_path), "stale")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(BaselineError, match="not valid JSON"):
        load_baseline(str(tmp_path), "broken")
    with pytest.raises(BaselineError, match="no baseline 'nope'.*baselines: broken, old"):
        load_baseline(str(tmp_path), "nope")


def test_a_step_without_operators_reads_zero(tmp_path: Path) -> None:
    # step 2 holds no operator at all (no column to fill in the pivot): 0.0, not NaN
    table = make_table([step(1, 0, 100), cpu_op("aten::mm", 10, 5), step(2, 100, 100),
                        step(3, 200, 100), cpu_op("aten::mm", 210, 7)], tmp_path)
    metrics = step_summary(table)["metrics"]
    assert metrics["operator:aten::mm"] == [5.0, 0.0, 7.0]
    assert metrics["op_category:GEMM"] == [5.0, 0.0, 7.0]


def test_sources_keep_the_heaviest_stacks_user_frames(tmp_path: Path) -> None:
    deep = ("torch/nn/functional.py(10): linear;model.py(5): forward;train.py(1): main;"
            "run.py(2): go;cli.py(3): entry")
    light = "b.py(1): h"
    internal = "torch/a.py(1): x;<built-in method y>"

    def op(name: str, ts: float, dur: float, stack: str) -> dict:
        return cpu_op(name, ts, dur, **{"Call stack": stack})

    table = make_table([
        step(1, 0, 900),
        op("aten::mm", 100, 50, deep),                              # deep: 50 us
        op("aten::mm", 200, 30, light), op("aten::mm", 300, 30, light),  # light: 60 us
        op("aten::add", 400, 20, internal),
        op("aten::mul", 500, 10, light), op("aten::mul", 600, 10, deep),  # a tie: 10 / 10
        cpu_op("aten::relu", 700, 5),                                # no stack: no source
    ], tmp_path)
    sources = step_summary(table)["sources"]
    assert sources == {
        "aten::mm": ["b.py(1): h"],
        "aten::add": ["torch/a.py(1): x", "<built-in method y>"],  # only torch's: kept
        # equal times: the first stack in text order ("b.py" < "torch/...") wins
        "aten::mul": ["b.py(1): h"],
    }
    heavy = make_table([step(1, 0, 900), op("aten::mm", 100, 70, deep),
                        op("aten::mm", 200, 30, light), op("aten::mm", 300, 30, light)],
                       tmp_path)
    # deep is now the heavier (70 > 60): its first 3 frames outside torch, innermost first
    assert step_summary(heavy)["sources"] == {
        "aten::mm": ["model.py(5): forward", "train.py(1): main", "run.py(2): go"]}


def _gpu_events() -> list:
    relu = "void relu_kernel<float>()"
    gemm = "void gemm_kernel<float>()"
    return [
        step(1, 0, 100), cpu_op("aten::mm", 10, 30, ext=1), runtime(15, 5, 1, ext=1),
        kernel(20, 10, 1, ext=1),
        step(2, 100, 100), cpu_op("aten::mm", 110, 30, ext=2), runtime(115, 5, 2, ext=2),
        kernel(120, 15, 2, ext=2),
        cpu_op("aten::relu", 150, 10, ext=3), runtime(152, 3, 3, ext=3),
        kernel(155, 4, 3, ext=3, name=relu),
        # after the last step: in no step's operator or kernel metrics
        cpu_op("aten::mm", 250, 30, ext=4), runtime(255, 5, 4, ext=4), kernel(300, 50, 4, ext=4),
    ], gemm, relu


def test_device_trace_uses_device_self_time_and_kernel_metrics(tmp_path: Path) -> None:
    events, gemm, relu = _gpu_events()
    out = step_summary(make_table(events, tmp_path, deviceProperties=[
        {"id": 0, "name": "NVIDIA H100"}, {"id": 1, "name": "NVIDIA A100"},
        {"id": 2, "name": "NVIDIA H100"}]))
    assert out["device"] == "NVIDIA A100, NVIDIA H100"  # distinct, sorted
    metrics = out["metrics"]
    assert metrics["operator:aten::mm"] == [10.0, 15.0]  # device self time, not host 30
    assert metrics["operator:aten::relu"] == [0.0, 4.0]
    assert metrics[f"kernel:{gemm}"] == [10.0, 15.0]
    assert metrics[f"kernel:{relu}"] == [0.0, 4.0]
    assert out["operators"] == ["aten::mm", "aten::relu"]


def test_device_names_fall_back_when_unrecorded(tmp_path: Path) -> None:
    events, _, _ = _gpu_events()
    assert step_summary(make_table(events, tmp_path))["device"] == "GPU (unnamed)"
    named_blank = make_table(events, tmp_path, deviceProperties=[{"id": 0, "name": ""}])
    assert step_summary(named_blank)["device"] == "GPU (unnamed)"


def test_other_operators_take_the_category_of_their_device_time(tmp_path: Path) -> None:
    events, gemm, _ = _gpu_events()
    # a custom op (no rule matches its name) launching a GEMM kernel in step 2: GEMM
    events += [cpu_op("custom::fused", 170, 20, ext=5), runtime(172, 3, 5, ext=5),
               kernel(180, 6, 5, ext=5)]
    metrics = step_summary(make_table(events, tmp_path))["metrics"]
    assert metrics["operator:custom::fused"] == [0.0, 6.0]
    assert metrics["op_category:GEMM"] == [10.0, 15.0 + 6.0]
    assert metrics["op_category:elementwise"] == [0.0, 4.0]
    assert "op_category:other" not in metrics
    # on a CPU trace an unmatched op stays "other"
    cpu = step_summary(make_table([step(1, 0, 100), cpu_op("aten::arange", 10, 5),
                                   cpu_op("custom::fused", 20, 7)], tmp_path))["metrics"]
    assert cpu["op_category:other"] == [12.0]


def test_user_frames_skip_frozen_and_site_packages_frames() -> None:
    stack = ("<frozen importlib._bootstrap>(1): _load;"
             "/usr/lib/python3/site-packages/lib/mod.py(3): helper;"
             "app.py(7): run;site-packages/x.py(1): y;main.py(2): main")
    assert user_frames(stack) == ["app.py(7): run", "main.py(2): main"]
    assert user_frames("  ;torch/a.py(1): f; ;") == ["torch/a.py(1): f"]  # blanks dropped
    assert user_frames("") == []


def test_record_keys_modules_structure_and_markers(tmp_path: Path) -> None:
    events = []
    for s in range(2):
        t = 1000 * s
        events += [step(s + 1, t, 900),
                   py("nn.Module: Net_0", t + 10, 300, 10 * s + 1, module=0),
                   py("nn.Module: Linear_0", t + 20, 100, 10 * s + 2, parent=10 * s + 1,
                      module=0),
                   cpu_op("aten::mm", t + 30, 50),
                   py("nn.Module: Head_0", t + 400, 100, 10 * s + 3, module=0),
                   cpu_op("aten::add", t + 410, 20)]
    out = step_summary(make_table(events, tmp_path))
    assert set(out) == {"version", "steps", "from_markers", "device", "modules", "operators",
                        "structure", "metrics", "sources", "state", "messages"}
    assert out["from_markers"] is True
    assert out["modules"] == ["nn.Module: Head_0", "nn.Module: Linear_0", "nn.Module: Net_0"]
    # the anchors directly under a step: the two top-level modules, in order
    assert out["structure"] == ["module:nn.Module: Net_0", "module:nn.Module: Head_0"]
    plain = step_summary(make_table([cpu_op("aten::mm", 0, 10)], tmp_path))
    assert plain["from_markers"] is False and plain["modules"] == []
    assert plain["structure"] == []


def test_one_step_and_no_step_traces(tmp_path: Path) -> None:
    # one (fallback) step holds every operator; an empty trace has no steps and no metrics
    plain = step_summary(make_table([cpu_op("aten::mm", 0, 10), cpu_op("aten::mm", 20, 5)],
                                    tmp_path))
    assert plain["steps"] == ["0"] and plain["metrics"]["operator:aten::mm"] == [15.0]
    empty = step_summary(make_table([], tmp_path))
    assert (empty["steps"], empty["operators"], empty["sources"]) == ([], [], {})
    assert empty["metrics"]["step:Total"] == []
    assert not any(k.startswith(("operator:", "kernel:", "op_category:"))
                   for k in empty["metrics"])
    assert empty["messages"] == ["the trace has no events"]


def test_an_operator_starting_on_a_step_boundary_belongs_to_the_later_step(tmp_path: Path
                                                                          ) -> None:
    # steps [0, 100) and [100, 200): [low, high) holds a start
    table = make_table([step(1, 0, 100), step(2, 100, 100), cpu_op("aten::mm", 0, 5),
                        cpu_op("aten::mm", 100, 7), cpu_op("aten::add", 200, 3),
                        cpu_op("aten::add", 199.5, 0.25)], tmp_path)
    metrics = step_summary(table)["metrics"]
    assert metrics["operator:aten::mm"] == [5.0, 7.0]
    assert metrics["operator:aten::add"] == [0.0, 0.25]  # the one at 200 is in no step


def test_structure_is_the_most_common_step_shape(tmp_path: Path) -> None:
    # step 1 runs Net then Head; steps 2 and 3 run Net only: the majority wins
    events = []
    for s in range(3):
        t = 1000 * s
        events += [step(s + 1, t, 900), py("nn.Module: Net_0", t + 10, 300, 10 * s + 1,
                                           module=0), cpu_op("aten::mm", t + 20, 50)]
        if s == 0:
            events += [py("nn.Module: Head_0", t + 400, 100, 10 * s + 2, module=0),
                       cpu_op("aten::add", t + 410, 20)]
    assert step_summary(make_table(events, tmp_path))["structure"] == [
        "module:nn.Module: Net_0"]


def test_device_names_skip_blank_and_malformed_entries(tmp_path: Path) -> None:
    events, _, _ = _gpu_events()
    table = make_table(events, tmp_path, deviceProperties=[
        {"id": 0, "name": ""}, "not a dict", {"id": 1, "name": "NVIDIA H100"}])
    assert step_summary(table)["device"] == "NVIDIA H100"


def test_sources_weigh_host_and_device_self_time(tmp_path: Path) -> None:
    # stack A: 20 us of host time; stack B: at most 10 us of host time but a 15 us kernel
    def op(ts: float, dur: float, stack: str, ext: int) -> dict:
        return cpu_op("aten::mm", ts, dur, ext=ext, **{"Call stack": stack})

    events = [step(1, 0, 900), op(100, 20, "a.py(1): f", 1),
              op(200, 10, "b.py(2): g", 2), runtime(202, 2, 2, ext=2), kernel(210, 15, 2, ext=2),
              op(300, 1, "z.py(3): h", 3)]
    sources = step_summary(make_table(events, tmp_path))["sources"]
    assert sources == {"aten::mm": ["b.py(2): g"]}
    more = events + [cpu_op("aten::add", 400, 5, **{"Call stack": "c.py(1): x"}),
                     cpu_op("aten::abs", 500, 5, **{"Call stack": "d.py(1): y"})]
    assert list(step_summary(make_table(more, tmp_path))["sources"]) == [
        "aten::abs", "aten::add", "aten::mm"]  # by name


def test_structure_leaves_out_plain_operators(tmp_path: Path) -> None:
    events = [step(1, 0, 900), cpu_op("aten::relu", 5, 3),
              py("nn.Module: Net_0", 10, 300, 1, module=0), cpu_op("aten::mm", 20, 50),
              cpu_op("aten::add", 600, 5)]  # relu and add sit directly under the step
    assert step_summary(make_table(events, tmp_path))["structure"] == [
        "module:nn.Module: Net_0"]
