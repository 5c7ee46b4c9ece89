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
