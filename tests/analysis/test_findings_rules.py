"""`analysis.findings` on small hand-built traces: each rule of the module docstring at its
boundary (which checks fail and what they affect, the step statistics and shares, the evidence
pointer of a recommendation, the top operators, which pointers a trace gets and in which order,
the 300-character cut, the rank / world size read from `distributedInfo`).

Every expected value is derived here from the events written (durations, counts), not read off
the module's output.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from tb_plugin.analysis import findings as F
from tb_plugin.analysis.breakdown import CATEGORIES
from tb_plugin.ingest.schema import ParseStatus
from tb_plugin.output.encoding import plain
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


def _memory(ts: float, total: int) -> dict:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 100,
            "tid": 200, "ts": ts, "args": {"Device Type": 0, "Device Id": -1, "Addr": 1000 + ts,
                                           "Bytes": 512, "Total Allocated": total,
                                           "Total Reserved": total}}


# -- _cut, _round, _int_or_none --------------------------------------------------------------


def test_cut_keeps_300_characters_and_cuts_301_to_297_and_dots():
    assert F._MAX_TEXT == 300
    for n in (0, 1, 299, 300):
        assert F._cut("a" * n) == "a" * n
    assert F._cut("b" * 301) == "b" * 297 + "..."
    assert F._cut("xy" * 400) == ("xy" * 400)[:297] + "..."
    assert len(F._cut("c" * 1000)) == 300


def test_round_and_int_or_none():
    assert F._round(None) is None
    assert F._round(0) == 0.0 and isinstance(F._round(0), float)
    assert F._round(12.3449) == 12.3 and F._round(12.36) == 12.4 and F._round(-1.26) == -1.3
    assert F._int_or_none(3) == 3 and F._int_or_none(0) == 0
    assert F._int_or_none(7.0) == 7 and type(F._int_or_none(7.0)) is int
    for not_a_number in (True, False, "3", None, [1], {"rank": 1}):
        assert F._int_or_none(not_a_number) is None


# -- _recommendation -------------------------------------------------------------------------


def _rec(**kw):
    base = {"id": "rule_x", "severity": "medium", "title": "T", "text": "short", "metric": 1.5,
            "unit": "%", "saving_us": 12.0, "saving_pct": 3.5, "view": "Kernel",
            "start_us": None, "end_us": None, "whatif": "launch=0"}
    return {**base, **kw}


def test_recommendation_evidence_is_the_range_only_when_both_ends_are_known():
    out = F._recommendation(_rec(start_us=10.0, end_us=25.5))
    assert out["evidence"] == {"view": "timeline_range",
                               "options": {"start_us": 10.0, "end_us": 25.5},
                               "why": "the events in the range that proves it"}
    # a 0 start is a known start (not a missing one)
    assert F._recommendation(_rec(start_us=0.0, end_us=0.0))["evidence"]["view"] == (
        "timeline_range")
    for start, end in ((None, 25.5), (10.0, None), (None, None)):
        out = F._recommendation(_rec(start_us=start, end_us=end))
        assert out["evidence"] == {"view": "kernels", "options": {},
                                   "why": "the Kernel view proves it"}


def test_recommendation_evidence_of_each_tab_and_of_an_unknown_one():
    for tab, view in F.TAB_VIEWS.items():
        assert F._recommendation(_rec(view=tab))["evidence"]["view"] == view
    out = F._recommendation(_rec(view="Nowhere"))
    assert out["evidence"] == {"view": "overview", "options": {},
                               "why": "the Nowhere view proves it"}


def test_recommendation_copies_its_fields_and_cuts_the_text():
    given = _rec(text="z" * 301)
    out = F._recommendation(given)
    assert out["text"] == "z" * 297 + "..."
    assert list(out) == ["id", "severity", "title", "text", "metric", "unit", "saving_us",
                         "saving_pct", "evidence", "whatif"]
    for key in ("id", "severity", "title", "metric", "unit", "saving_us", "saving_pct",
                "whatif"):
        assert out[key] == given[key]
    assert F._recommendation(_rec(text="z" * 300))["text"] == "z" * 300


# -- _steps ----------------------------------------------------------------------------------


def _overview(totals, mean, breakdown, notes=()):
    return {"steps": [{"name": f"s{i}", "total_us": t} for i, t in enumerate(totals)],
            "average": {"total_us": mean, "breakdown_us": {c: breakdown.get(c, 0.0)
                                                           for c in CATEGORIES}},
            "notes": list(notes)}


def test_steps_statistics_and_shares():
    totals = [10.26, 30.06, 20.0, 29.99]
    mean = sum(totals) / 4  # 22.5775
    kernel_us, runtime_us = 11.26, mean - 11.26
    out = F._steps(_overview(totals, mean, {"Kernel": kernel_us, "Runtime": runtime_us}))
    assert out == {
        "count": 4, "from_markers": True, "mean_us": 22.6, "min_us": 10.3, "max_us": 30.1,
        "slowest": "s1",
        "breakdown_pct": {"Kernel": round(100 * 11.26 / 22.5775, 1),
                          "Runtime": round(100 * (22.5775 - 11.26) / 22.5775, 1)},
    }
    assert out["breakdown_pct"] == {"Kernel": 49.9, "Runtime": 50.1}
    assert all(type(v) is float for v in (out["mean_us"], out["min_us"], out["max_us"],
                                          *out["breakdown_pct"].values()))
    # shares are in the categories' order, whichever order the dict was written in
    every = {c: float(i + 1) for i, c in enumerate(CATEGORIES)}
    shares = F._steps(_overview([5.0], 5.0, dict(reversed(every.items()))))["breakdown_pct"]
    assert list(shares) == list(CATEGORIES)
    assert shares[CATEGORIES[0]] == 20.0 and shares[CATEGORIES[2]] == 60.0


def test_steps_keep_only_categories_over_zero_and_nothing_for_a_zero_mean():
    out = F._steps(_overview([4.0, 6.0], 5.0, {"Kernel": 5.0, "Memcpy": 0.0, "Other": -1.0}))
    assert out["breakdown_pct"] == {"Kernel": 100.0}
    assert F._steps(_overview([0.0], 0.0, {"Kernel": 0.0}))["breakdown_pct"] == {}
    assert F._steps(_overview([0.0], 0.0, {"Kernel": 1.0}))["breakdown_pct"] == {}
    tiny = F._steps(_overview([0.01], 0.01, {"Kernel": 0.01}))
    assert tiny["breakdown_pct"] == {"Kernel": 100.0} and tiny["mean_us"] == 0.0


def test_slowest_step_is_the_first_of_equal_maxima():
    assert F._steps(_overview([7.0, 9.0, 9.0, 1.0], 6.5, {}))["slowest"] == "s1"
    one = F._steps(_overview([3.0], 3.0, {}))
    assert (one["count"], one["min_us"], one["max_us"], one["slowest"]) == (1, 3.0, 3.0, "s0")


def test_no_steps():
    out = F._steps(_overview([], 0.0, {}))
    assert out == {"count": 0, "from_markers": True, "mean_us": 0.0, "min_us": None,
                   "max_us": None, "slowest": None, "breakdown_pct": {}}


def test_from_markers_is_false_only_for_the_fallback_note():
    note = "No ProfilerStep#N markers: the whole trace is one step"
    assert F._steps(_overview([1.0], 1.0, {}, [note]))["from_markers"] is False
    assert F._steps(_overview([1.0], 1.0, {}, ["other", note]))["from_markers"] is False
    for notes in ([], ["no ProfilerStep#N markers"], ["Removed: No ProfilerStep#N markers"]):
        assert F._steps(_overview([1.0], 1.0, {}, notes))["from_markers"] is True


# -- health ----------------------------------------------------------------------------------

_AFFECTS = {"parse": ["*"], "gpu": ["kernels", "kernel_pies", "roofline", "gpu_idle", "whatif"],
            "steps": ["overview", "gpu_idle", "whatif", "diff"],
            "graphs": ["overview", "roofline", "gpu_idle"],
            "shapes": ["operators", "roofline", "compiled"], "call_stacks": ["operator_stack"],
            "memory": ["memory"], "modules": ["modules"], "flows": ["timeline_event"]}


def _health(table):
    return {h["id"]: h for h in F.build_findings(table, top=5)["health"]}


def test_health_of_a_bare_cpu_trace_fails_every_optional_check(tmp_path):
    table = make_table([cpu_op("aten::add", 10, 30), cpu_op("aten::mul", 50, 20)], tmp_path)
    checks = F.build_findings(table, top=5)["health"]
    assert [c["id"] for c in checks] == list(_AFFECTS)
    details = {
        "parse": "ok", "gpu": "0 kernels, 0 memcpy, 0 memset",
        "steps": '1 steps (no ProfilerStep#N markers: one step "0")',
        "graphs": "no CUDA/HIP graphs",
        "shapes": "0 operator calls with input shapes (record_shapes=True)",
        "call_stacks": "0 operator calls with a call stack (with_stack=True)",
        "memory": "0 memory events (profile_memory=True)",
        "modules": "0 module events (with_modules=True)", "flows": "0 flow events"}
    ok = {"parse", "graphs"}
    for check in checks:
        name = check["id"]
        assert check == {"id": name, "ok": name in ok, "detail": details[name],
                         "affects": [] if name in ok else _AFFECTS[name]}
        assert type(check["ok"]) is bool


def _rich_events():
    return [
        step(1, 0, 100), step(2, 100, 100), step(3, 200, 100),
        cpu_op("aten::mm", 10, 50, ext=1, **{"Input Dims": [[2, 3]], "Call stack": "a.py(1)"}),
        cpu_op("aten::add", 110, 30, ext=2, **{"Input Dims": [[2]]}),
        cpu_op("aten::mul", 210, 20, ext=3),
        runtime(20, 5, corr=11, ext=1), kernel(30, 40, corr=11, ext=1),
        runtime(115, 5, corr=12, ext=2), memcpy(125, 10, corr=12, ext=2),
        runtime(215, 5, corr=13, ext=3), memset(225, 4, corr=13, ext=3),
        runtime(218, 1, corr=14, ext=3), kernel(240, 30, corr=14, ext=3),
        flow("s", 1, 10), flow("f", 1, 120), flow("s", 2, 110),
        _memory(11, 512), _memory(12, 1024),
        py("nn.Module: Linear_0", 5, 60, python_id=1, module=7),
        py("nn.Module: Linear_0", 105, 40, python_id=2, module=7),
        py("helper", 106, 2, python_id=3, parent=2),
    ]


def test_health_of_a_rich_gpu_trace_passes_every_check(tmp_path):
    table = make_table(_rich_events(), tmp_path)
    checks = _health(table)
    assert all(c["ok"] is True and c["affects"] == [] for c in checks.values())
    assert checks["gpu"]["detail"] == "2 kernels, 1 memcpy, 1 memset"
    count = F.build_findings(table, top=5)["steps"]["count"]
    assert count >= 2 and checks["steps"]["detail"] == f"{count} steps"
    assert checks["shapes"]["detail"].startswith("2 operator calls with input shapes")
    assert checks["call_stacks"]["detail"].startswith("1 operator calls with a call stack")
    assert checks["memory"]["detail"].startswith("2 memory events")
    assert checks["modules"]["detail"].startswith("2 module events")
    assert checks["flows"]["detail"] == "3 flow events"


@pytest.mark.parametrize("kind", ["kernel", "memcpy", "memset"])
def test_one_device_event_of_any_kind_is_a_gpu_trace(tmp_path, kind):
    device = {"kernel": kernel, "memcpy": memcpy, "memset": memset}[kind]
    table = make_table([step(1, 0, 100), step(2, 100, 100), cpu_op("aten::to", 10, 20, ext=1),
                        runtime(12, 2, corr=5, ext=1), device(40, 10, corr=5, ext=1)],
                       tmp_path)
    out = F.build_findings(table, top=5)
    assert out["trace"]["device"] == "GPU"
    counts = {"kernel": 0, "memcpy": 0, "memset": 0, kind: 1}
    assert _health(table)["gpu"] == {
        "id": "gpu", "ok": True, "affects": [],
        "detail": f"{counts['kernel']} kernels, {counts['memcpy']} memcpy, "
                  f"{counts['memset']} memset"}
    assert {"kernels", "gpu_idle", "roofline", "whatif"} <= {p["view"] for p in out["pointers"]}


def test_a_parse_problem_fails_the_parse_check_with_its_messages(tmp_path):
    table = make_table([cpu_op("aten::add", 10, 30)], tmp_path)
    broken = dataclasses.replace(table, status=ParseStatus(
        state="partial", messages=["bad event 3", "bad event 9"]))
    check = _health(broken)["parse"]
    assert check == {"id": "parse", "ok": False, "detail": "partial: bad event 3; bad event 9",
                     "affects": ["*"]}
    long = dataclasses.replace(table, status=ParseStatus(state="truncated", messages=["m" * 400]))
    assert _health(long)["parse"]["detail"] == ("truncated: " + "m" * 400)[:297] + "..."
    quiet = dataclasses.replace(table, status=ParseStatus(state="partial", messages=[]))
    assert _health(quiet)["parse"]["detail"] == "partial"
    assert F.build_findings(broken, top=5)["trace"]["state"] == "partial"


def test_present_counts_the_rows_holding_a_value():
    frame = pd.DataFrame({"a": [1.0, None, 3.0], "b": [None, None, None]})
    assert F._present(frame, "a") == 2 and F._present(frame, "b") == 0
    assert F._present(frame, "c") == 0


# -- top operators ---------------------------------------------------------------------------


def test_top_operators_of_a_cpu_trace_are_the_five_largest_host_self_times(tmp_path):
    durations = {"op_a": 20.04, "op_b": 70.26, "op_c": 10.0, "op_d": 50.17, "op_e": 60.0,
                 "op_f": 40.33, "op_g": 30.0}
    events, ts = [], 0.0
    for name, dur in durations.items():
        events.append(cpu_op(name, ts, dur))
        ts += dur + 5
    total = sum(durations.values())
    out = F.build_findings(make_table(events, tmp_path), top=5)["top_operators"]
    ranked = sorted(durations, key=durations.get, reverse=True)[:5]
    assert [o["name"] for o in out] == ranked == ["op_b", "op_e", "op_d", "op_f", "op_g"]
    for row in out:
        d = durations[row["name"]]
        assert row == {"name": row["name"], "self_us": round(d, 1),
                       "self_pct": round(100 * d / total, 1)}


def test_top_operators_leave_out_zero_self_times(tmp_path):
    events = [cpu_op("big", 0, 30), cpu_op("small", 40, 10), cpu_op("empty", 60, 0)]
    out = F.build_findings(make_table(events, tmp_path), top=5)["top_operators"]
    assert out == [{"name": "big", "self_us": 30.0, "self_pct": 75.0},
                   {"name": "small", "self_us": 10.0, "self_pct": 25.0}]


def test_top_operators_of_a_gpu_trace_are_by_device_self_time(tmp_path):
    out = F.build_findings(make_table(_rich_events(), tmp_path), top=5)["top_operators"]
    # device self time: mm 40 (kernel), add 10 (memcpy), mul 4 + 30 (memset, kernel)
    total = 40 + 10 + 34
    assert out == [{"name": "aten::mm", "self_us": 40.0, "self_pct": round(4000 / total, 1)},
                   {"name": "aten::mul", "self_us": 34.0, "self_pct": round(3400 / total, 1)},
                   {"name": "aten::add", "self_us": 10.0, "self_pct": round(1000 / total, 1)}]


# -- pointers --------------------------------------------------------------------------------


def test_pointers_of_a_bare_cpu_trace(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 250), step(3, 350, 100),
              cpu_op("aten::add", 10, 30), cpu_op("aten::mul", 150, 20)]
    out = F.build_findings(make_table(events, tmp_path), top=5)["pointers"]
    assert out == [
        {"view": "overview", "options": {},
         "why": "steps, breakdown, GPU summary, all recommendations"},
        {"view": "operators", "options": {"group_by": "operator"},
         "why": "every operator's host and device time"},
        {"view": "timeline_range", "options": {"start_us": 100.0, "end_us": 350.0},
         "why": "the events of the slowest step (2) by name"},
    ]


def test_the_slowest_step_pointer_is_the_first_of_equal_steps(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 200), step(3, 300, 200), step(4, 500, 100),
              cpu_op("aten::add", 10, 30)]
    out = F.build_findings(make_table(events, tmp_path), top=5)["pointers"]
    assert out[-1] == {"view": "timeline_range", "options": {"start_us": 100.0, "end_us": 300.0},
                       "why": "the events of the slowest step (2) by name"}


def test_pointers_of_a_rich_gpu_trace_in_order(tmp_path):
    table = make_table(_rich_events(), tmp_path,
                       distributedInfo={"rank": 1, "world_size": 2, "backend": "nccl"})
    out = F.build_findings(table, top=5)["pointers"]
    assert [p["view"] for p in out] == ["overview", "operators", "kernels", "gpu_idle",
                                        "roofline", "memory", "modules", "distributed",
                                        "timeline_range", "whatif"]
    by_view = {p["view"]: p for p in out}
    assert by_view["kernels"]["options"] == {"group_by": "kernel"}
    assert by_view["whatif"]["options"] == {"edit": "launch=0"}
    assert all(by_view[v]["options"] == {} for v in ("gpu_idle", "roofline", "memory",
                                                      "modules", "distributed"))
    assert by_view["memory"]["why"] == "allocations, peaks, per-operator memory"
    assert by_view["modules"]["why"] == "time per nn.Module"
    assert by_view["distributed"]["why"] == ("every worker of the span: overlap, stragglers, "
                                             "collectives")


def test_a_communication_op_alone_points_to_the_distributed_view(tmp_path):
    events = [step(1, 0, 100), step(2, 100, 100), cpu_op("nccl:all_reduce", 10, 30)]
    views = [p["view"] for p in F.build_findings(make_table(events, tmp_path), top=5)["pointers"]]
    assert views == ["overview", "operators", "distributed", "timeline_range"]
    out = F.build_findings(make_table(events, tmp_path), top=5)["trace"]
    assert (out["rank"], out["world_size"]) == (None, None)


def test_a_serving_step_points_to_the_inference_view(tmp_path):
    events = [cpu_op("step[DECODE bs=4]", 0, 100, cat="user_annotation"),
              cpu_op("aten::add", 10, 30)]
    out = F.build_findings(make_table(events, tmp_path), top=5)["pointers"]
    assert [p["view"] for p in out][:3] == ["overview", "operators", "inference"]
    assert out[2] == {"view": "inference", "options": {},
                      "why": "serving steps: phase, tokens, time per token, HBM bandwidth"}


# -- trace, gpus, recommendations --------------------------------------------------------------


def test_trace_block(tmp_path):
    table = make_table(_rich_events(), tmp_path,
                       distributedInfo={"rank": 3, "world_size": 8.0, "backend": "nccl"})
    out = plain(F.build_findings(table, top=5))
    assert out["trace"] == {"state": "ok", "events": len(_rich_events()), "device": "GPU",
                            "gpus": ["0"], "rank": 3, "world_size": 8}
    assert out["schema_version"] == 1
    cpu = make_table([cpu_op("aten::add", 10, 30)], tmp_path,
                     distributedInfo={"rank": "3", "world_size": True})
    trace = F.build_findings(cpu, top=5)["trace"]
    assert (trace["device"], trace["gpus"], trace["rank"], trace["world_size"]) == (
        "CPU", [], None, None)
    assert F.build_findings(cpu, top=5)["gpus"] == []


def test_gpu_block_rounds_the_overview_numbers(tmp_path):
    # one step 0..100 whose GPU runs 40 us of kernel: utilization 40 %
    events = [step(1, 0, 100), step(2, 100, 100), cpu_op("aten::mm", 10, 30, ext=1),
              runtime(12, 2, corr=5, ext=1), kernel(30, 40, corr=5, ext=1),
              cpu_op("aten::mm", 110, 30, ext=2),
              runtime(112, 2, corr=6, ext=2), kernel(130, 40, corr=6, ext=2)]
    gpus = F.build_findings(make_table(events, tmp_path), top=5)["gpus"]
    assert len(gpus) == 1 and list(gpus[0]) == list(F._GPU_KEYS)
    assert gpus[0]["utilization_pct"] == 40.0


def test_recommendations_are_the_first_top_of_the_overviews(tmp_path):
    table = make_table(_rich_events(), tmp_path)
    every = F.build_overview(table)["recommendations"]
    assert len(every) >= 1
    for top in (1, len(every), len(every) + 3):
        out = F.build_findings(table, top=top)
        assert [r["id"] for r in out["recommendations"]] == [r["id"] for r in every][:top]
        assert out["recommendations_total"] == len(every)
    assert F.build_findings(table, top=5)["notes"] == list(F.build_overview(table)["notes"])


def test_graph_modes_in_health(tmp_path):
    """A graph launch that replays kernels: "replay" (ok); launches recorded between
    cudaStreamBeginCapture and cudaStreamEndCapture with nothing replayed: "capture" (fails,
    with the views it affects)."""
    replay = make_table([step(1, 0, 1000), step(2, 1000, 100),
                         runtime(100, 50, corr=10, name="cudaGraphLaunch"),
                         kernel(200, 30, corr=10, name="k_a")], tmp_path)
    assert _health(replay)["graphs"] == {
        "id": "graphs", "ok": True, "affects": [],
        "detail": "graph replay: kernels attributed to the operators that captured them "
                  "where the capture trace is paired"}
    capture = make_table([step(1, 0, 200), step(2, 200, 100),
                          runtime(10, 2, corr=3, name="cudaStreamBeginCapture"),
                          cpu_op("aten::mm", 20, 10, ext=1), runtime(22, 3, corr=5, ext=1),
                          runtime(60, 5, corr=4, name="cudaStreamEndCapture")], tmp_path)
    assert _health(capture)["graphs"] == {
        "id": "graphs", "ok": False, "affects": ["overview", "roofline", "gpu_idle"],
        "detail": "a graph capture trace: its kernels were recorded in stream capture, not "
                  "run, so utilization and MFU do not apply"}


def test_the_steps_check_needs_markers_and_one_step(tmp_path):
    table = make_table([cpu_op("aten::add", 10, 30)], tmp_path)
    counts = F.features(table)

    def check(from_markers, count):
        [out] = [c for c in F.health(table, counts, {"from_markers": from_markers,
                                                      "count": count}) if c["id"] == "steps"]
        return out

    assert check(True, 1) == {"id": "steps", "ok": True, "detail": "1 steps", "affects": []}
    assert check(True, 2)["ok"] is True
    assert check(True, 0) == {"id": "steps", "ok": False, "detail": "0 steps",
                              "affects": _AFFECTS["steps"]}
    assert check(False, 1) == {"id": "steps", "ok": False, "affects": _AFFECTS["steps"],
                               "detail": '1 steps (no ProfilerStep#N markers: one step "0")'}


def test_one_of_each_passes_its_check(tmp_path):
    """Each count check is `count > 0`: one event of each kind passes."""
    table = make_table([
        step(1, 0, 100), step(2, 100, 100),
        cpu_op("aten::mm", 10, 50, ext=1, **{"Input Dims": [[2, 3]]}),
        cpu_op("aten::add", 110, 30, **{"Call stack": "a.py(1)"}),
        runtime(20, 5, corr=11, ext=1), kernel(30, 40, corr=11, ext=1),
        flow("s", 1, 10), _memory(11, 512),
        py("nn.Module: Linear_0", 105, 40, python_id=1, module=7),
    ], tmp_path)
    checks = _health(table)
    assert all(c["ok"] is True and c["affects"] == [] for c in checks.values())
    assert checks["gpu"]["detail"] == "1 kernels, 0 memcpy, 0 memset"
    assert checks["shapes"]["detail"] == (
        "1 operator calls with input shapes (record_shapes=True)")
    assert checks["call_stacks"]["detail"] == (
        "1 operator calls with a call stack (with_stack=True)")
    assert checks["memory"]["detail"] == "1 memory events (profile_memory=True)"
    assert checks["modules"]["detail"] == "1 module events (with_modules=True)"
    assert checks["flows"]["detail"] == "1 flow events"


def test_no_operators_no_top_operators(tmp_path):
    assert F.build_findings(make_table([], tmp_path), top=5)["top_operators"] == []
    gpu_only = make_table([kernel(1, 2, corr=1)], tmp_path)
    assert F.build_findings(gpu_only, top=5)["top_operators"] == []


def test_a_sub_microsecond_operator_is_a_top_operator(tmp_path):
    out = F.build_findings(make_table([cpu_op("tiny", 0, 0.5)], tmp_path), top=5)
    assert out["top_operators"] == [{"name": "tiny", "self_us": 0.5, "self_pct": 100.0}]
    two = F.build_findings(make_table([cpu_op("a", 0, 0.25), cpu_op("b", 1, 0.5)], tmp_path),
                           top=5)["top_operators"]
    assert two == [{"name": "b", "self_us": 0.5, "self_pct": round(50 / 0.75, 1)},
                   {"name": "a", "self_us": 0.2, "self_pct": round(25 / 0.75, 1)}]


def test_gpu_pointer_texts(tmp_path):
    out = F.build_findings(make_table(_rich_events(), tmp_path), top=5)["pointers"]
    by_view = {p["view"]: p for p in out}
    assert by_view["kernels"]["why"] == "every kernel's time and occupancy"
    assert by_view["gpu_idle"]["why"] == "why the GPU waits: idle time per step and queue"
    assert by_view["roofline"]["why"] == "FLOPs, achieved TFLOP/s, MFU per step"
    assert by_view["whatif"]["why"] == ("the predicted step time without launch overhead (any "
                                        "edit: README, What if)")
    assert by_view["timeline_range"]["why"].startswith("the events of the slowest step (")
