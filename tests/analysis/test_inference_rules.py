"""Serving steps (`analysis.inference`) at the boundaries of their rules: SGLang token counts
from `ext`/`dec` alone, a zero-length annotation is a step (one without a duration is not),
steps of two threads interleaved in time keep their own device work, and step names are plain
`str`. Expected values are the events written here."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.inference.annotations import (
    parse_step_name,
    serving_annotation_mask,
)
from tb_plugin.analysis.inference.steps import serving_steps
from tb_plugin.analysis.inference.view import MAX_STEPS, build_inference

from .helpers import cpu_op, kernel, make_table, runtime


@pytest.mark.parametrize(("name", "tokens", "context", "generation"), [
    ("step[MIXED bs=6 dec=4]", 4, None, 4),
    ("step[MIXED bs=6 ext=9]", 9, 9, None),
    ("step[MIXED bs=6 ext=9 dec=4]", 13, 9, 4),
    ("step[MIXED bs=6 c_sq=7]", 7, 7, None),
    ("step[MIXED bs=6 g_sq=5]", 5, None, 5),
    ("step[MIXED bs=6 toks=11 ext=9 dec=4]", 11, 9, 4),  # toks wins
    ("step[MIXED bs=6 ext=9 c_sq=7]", 9, 7, None),  # ext/dec before c_sq/g_sq
    ("step[MIXED bs=6]", None, None, None),
    ("step[DECODE bs=6 dec=2]", 2, None, 2),
    ("step[DECODE bs=6]", 6, None, None),  # decode: one token per request
])
def test_sglang_token_counts(name, tokens, context, generation):
    parsed = parse_step_name(name)
    assert (parsed["tokens"], parsed["context_tokens"], parsed["generation_tokens"]) == (
        tokens, context, generation)
    assert parsed["requests"] == 6


def test_a_zero_length_annotation_is_a_step(tmp_path):
    """Zero-length annotations are steps (a negative duration is read as zero by the parser);
    one without a duration, a cpu_op or another name is none."""
    events = [cpu_op("step[DECODE bs=1]", 0, 0, cat="user_annotation"),
              cpu_op("step[DECODE bs=2]", 10, 5, cat="user_annotation"),
              cpu_op("step[DECODE bs=3]", 20, -1, cat="user_annotation"),
              cpu_op("step[DECODE bs=4]", 30, 5),  # a cpu_op, not an annotation
              cpu_op("not a step", 40, 5, cat="user_annotation")]
    no_dur = cpu_op("step[DECODE bs=5]", 50, 1, cat="user_annotation")
    del no_dur["dur"]
    table = make_table([*events, no_dur], tmp_path)
    names = table.events["name"].astype(str).to_numpy()
    assert sorted(names[serving_annotation_mask(table)]) == [
        "step[DECODE bs=1]", "step[DECODE bs=2]", "step[DECODE bs=3]"]
    steps = serving_steps(table)
    assert steps["requests"].tolist() == [1.0, 2.0, 3.0]
    assert steps["host_us"].tolist() == [0.0, 5.0, 0.0]


def test_interleaved_threads_keep_their_device_work(tmp_path):
    """Thread 1 has steps at [0, 100) and [200, 300), thread 2 at [100, 200) and [300, 400);
    each step launches one kernel on its own thread, of 1, 2, 3, 4 us in start order."""
    events = []
    for i, (start, tid) in enumerate(((0, 1), (100, 2), (200, 1), (300, 2))):
        events += [cpu_op(f"step[DECODE bs={i + 1}]", start, 100, cat="user_annotation",
                          tid=tid),
                   runtime(start + 10, 1, corr=i + 1, tid=tid),
                   kernel(start + 50, i + 1, corr=i + 1)]
    steps = serving_steps(make_table(events, tmp_path))
    assert steps["step"].tolist() == [0, 1, 2, 3]
    assert steps.index.tolist() == [0, 1, 2, 3]
    assert steps["start"].tolist() == [0.0, 100.0, 200.0, 300.0]
    assert steps["requests"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert steps["gpu_us"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert steps["device_events"].tolist() == [1, 1, 1, 1]
    assert steps["gpu_start"].tolist() == [50.0, 150.0, 250.0, 350.0]


def test_step_names_are_plain_strings(tmp_path):
    steps = serving_steps(make_table([cpu_op("step[DECODE bs=1]", 0, 5, cat="user_annotation")],
                                     tmp_path))
    assert [type(n) for n in steps["name"]] == [str]
    assert steps["name"].tolist() == ["step[DECODE bs=1]"]


def test_payload_rows_phases_and_notes(tmp_path):
    """Two decode steps [0, 100) and [100, 200) launching a 10 and a 20 us kernel, an idle step
    [200, 250), a prefill step [300, 340) of 8 tokens launching nothing (its time is its host
    length, 40 us). Decode median 15 us: no warm-up (10 <= 30). No shapes: no bytes."""
    events = [
        cpu_op("step[DECODE bs=2]", 0, 100, cat="user_annotation"),
        runtime(10, 1, corr=1), kernel(20, 10, corr=1),
        cpu_op("step[DECODE bs=2]", 100, 100, cat="user_annotation"),
        runtime(110, 1, corr=2), kernel(120, 20, corr=2),
        cpu_op("step[idle]", 200, 50, cat="user_annotation"),
        cpu_op("step[EXTEND bs=1 toks=8]", 300, 40, cat="user_annotation"),
    ]
    payload = build_inference(make_table(events, tmp_path))
    assert payload["total_steps"] == 4 and payload["max_steps"] == MAX_STEPS
    assert payload["steady"] == {"steps": 3, "first_step": 0, "last_step": 3, "warmup": 0,
                                 "capture": 0, "idle": 1, "warmup_factor": 2.0}
    no_gemm = "no GEMM (aten::mm/addmm) input shapes inside the step"
    first, _, idle, prefill = payload["steps"]
    assert first == {
        "step": 0, "name": "step[DECODE bs=2]", "phase": "decode", "state": "steady",
        "source": "sglang", "mode": "DECODE", "requests": 2, "context_requests": 0,
        "generation_requests": 2, "tokens": 2, "kv_tokens": None, "start_us": 0.0,
        "host_us": 100.0, "device_events": 1, "gpu_us": 10.0, "span_us": 10.0,
        "time_us": 10.0, "us_per_token": 5.0, "bytes": None, "bandwidth_tbps": None,
        "bandwidth_pct": None, "bytes_reason": no_gemm}
    assert (idle["phase"], idle["state"], idle["tokens"], idle["us_per_token"]) == (
        "idle", "idle", None, None)
    assert (prefill["device_events"], prefill["gpu_us"], prefill["span_us"],
            prefill["time_us"], prefill["us_per_token"]) == (0, 0.0, None, 40.0, 5.0)
    decode, pre = sorted(payload["phases"], key=lambda p: p["phase"])
    assert {k: v for k, v in decode.items() if k != "categories"} == {
        "phase": "decode", "steps": 2, "mean_requests": 2.0, "tokens": 4, "time_us": 30.0,
        "mean_step_us": 15.0, "us_per_token": 7.5, "tokens_per_s": 4 / 30e-6,
        "inter_token_latency_us": 15.0, "bandwidth_steps": 0, "mean_bytes": None,
        "bandwidth_tbps": None, "bandwidth_pct": None}
    assert sum(c["time_us"] for c in decode["categories"]) == 30.0
    assert sum(c["pct"] for c in decode["categories"]) == pytest.approx(100.0)
    assert (pre["steps"], pre["tokens"], pre["us_per_token"], pre["tokens_per_s"],
            pre["inter_token_latency_us"]) == (1, 8, 5.0, 200_000.0, None)  # 8 tokens / 40 us
    assert [c["pct"] for c in pre["categories"]] == [0.0] * len(pre["categories"])
    assert payload["notes"] == [f"Decode memory bandwidth is not estimable here: {no_gemm}."]
    assert payload["device"] == {"device": 0, "name": None, "peaks_model": None,
                                 "memory_tbps": None}


@pytest.mark.parametrize(("name", "context", "generation", "phase", "tokens"), [
    # explicit c= / g= win over the mode's defaults, and the counts decide the phase
    ("step[EXTEND bs=4 c=3 g=1]", 3, 1, "mixed", None),
    ("step[DECODE bs=4 c=1 g=3]", 1, 3, "mixed", 3),  # decode: one token per generation req.
    ("step[PREFILL bs=4 c=2]", 2, 0, "prefill", None),
    ("step[DECODE bs=4 g=2]", 0, 2, "decode", 2),
    ("step[EXTEND bs=4]", 4, 0, "prefill", None),
    ("step[DECODE bs=4]", 0, 4, "decode", 4),
])
def test_sglang_explicit_request_counts(name, context, generation, phase, tokens):
    parsed = parse_step_name(name)
    assert (parsed["context_requests"], parsed["generation_requests"], parsed["requests"],
            parsed["phase"], parsed["tokens"]) == (context, generation, 4, phase, tokens)


def test_steps_after_a_nested_one_are_read_and_a_launch_in_row_zero_counts(tmp_path):
    """A launch that is the trace's first event (row 0) is a launch like any other; after a
    nested annotation (one step) the next annotation is a step of its own."""
    events = [
        runtime(10, 1, corr=1),  # row 0
        cpu_op("execute_context_0(0)_generation_4(4)", 0, 200, cat="user_annotation"),
        cpu_op("step[DECODE bs=4]", 5, 150, cat="user_annotation"),
        kernel(20, 5, corr=1),
        cpu_op("step[DECODE bs=2]", 300, 100, cat="user_annotation"),
        runtime(310, 1, corr=2), kernel(320, 7, corr=2),
    ]
    steps = serving_steps(make_table(events, tmp_path))
    assert steps["requests"].tolist() == [4.0, 2.0]
    assert steps["device_events"].tolist() == [1, 1]
    assert steps["gpu_start"].tolist() == [20.0, 320.0]
    assert steps["gpu_end"].tolist() == [25.0, 327.0]


def test_a_capture_launch_at_the_step_start_makes_a_capture_step(tmp_path):
    events = [
        cpu_op("step[DECODE bs=4]", 100, 100, cat="user_annotation"),
        runtime(50, 2, corr=1, name="cudaStreamBeginCapture"),
        runtime(100, 3, corr=2),  # at the step's start
        runtime(250, 2, corr=3, name="cudaStreamEndCapture"),
        cpu_op("step[DECODE bs=4]", 300, 100, cat="user_annotation"),
        runtime(310, 1, corr=4), kernel(320, 7, corr=4),
    ]
    assert serving_steps(make_table(events, tmp_path))["state"].tolist() == ["capture",
                                                                              "steady"]
