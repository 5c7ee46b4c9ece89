"""Call stacks derived from PyTorch 2.x `python_function` events (callstacks.py)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.callstacks import FRAME_RE, MAX_FRAMES, _threads, python_call_stacks
from tb_plugin.analysis.operators import build_call_stacks, build_operators
from tb_plugin.load import load_trace

from .helpers import CPU_PID, CPU_TID, cpu_op, make_table

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CNN = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
UI_FRAME = re.compile(r"^(.*)\((\d+)\):\s*(.*)$")  # the frontend's frame parser

_ids = iter(range(1, 1_000_000))


def pf(name, ts, dur, pid=None, parent=None, *, tid=CPU_TID, module=None):
    """A python_function event; returns (event, its Python id)."""
    pid = next(_ids) if pid is None else pid
    args = {"Python id": pid, "Python parent id": parent, "Python thread": 0}
    if module is not None:
        args["Python module id"] = module
    return {"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID, "tid": tid,
            "ts": ts, "dur": dur, "args": args}


def model_call(ts, parent):
    """nn.Module wrapper -> _call_impl -> model.py forward -> built-in conv2d -> aten ops,
    then a relu; 300 us from `ts`."""
    events = [pf("nn.Module: Net_0", ts, 300, 1000 + ts, parent, module=7),
              pf("torch/nn/modules/module.py(1532): _call_impl", ts + 1, 298, 2000 + ts,
                 1000 + ts),
              pf("model.py(7): forward", ts + 2, 296, 3000 + ts, 2000 + ts),
              pf("<built-in method conv2d of type object at 0x7f00>", ts + 10, 70, 4000 + ts,
                 3000 + ts),
              cpu_op("aten::conv2d", ts + 11, 60, **{"Input Dims": [[ts, 3]]}),
              cpu_op("aten::convolution", ts + 12, 40),
              pf("<built-in method relu of type object at 0x7f01>", ts + 90, 40, 5000 + ts,
                 3000 + ts),
              cpu_op("aten::relu", ts + 91, 20)]
    return events


CONV = ("model.py(7): forward;torch/nn/modules/module.py(1532): _call_impl;"
        "train.py(3): train_step;train.py(10): <module>")


def crafted_events():
    return [
        pf("train.py(10): <module>", 0, 1000, 1),
        pf("train.py(3): train_step", 10, 490, 2, 1),
        *model_call(20, 2),
        # after the module call ended: the last python event starting before it (relu's
        # built-in) and three of its ancestors have closed; train_step is the one still open
        cpu_op("aten::add", 400, 20),
        pf("train.py(3): train_step", 600, 300, 3, 1),
        *model_call(610, 3),
        pf("train.py(20): log", 920, 30, 4, 1),
        cpu_op("aten::add", 925, 5),
        cpu_op("aten::mul", 960, 10),  # only <module> is open
        cpu_op("aten::zeros", -50, 5),  # before any python event
        pf("worker.py(5): loop", 0, 50, tid=300),
        cpu_op("aten::mm", 100, 10, tid=300),  # its thread's python event has ended
        cpu_op("aten::mm", 200, 10, tid=400),  # a thread without python events
    ]


@pytest.fixture
def crafted(tmp_path):
    return make_table(crafted_events(), tmp_path)


def stacks_by_name(table):
    stacks = python_call_stacks(table)
    names = table.events["name"].to_numpy()[stacks.rows]
    out: dict[str, list[str]] = {}
    for name, code in zip(names, stacks.code):
        out.setdefault(name, []).append(stacks.stacks[code] if code >= 0 else "")
    return out


def test_crafted_stack_strings(crafted):
    got = stacks_by_name(crafted)
    assert got["aten::conv2d"] == [CONV, CONV]
    assert got["aten::convolution"] == [CONV, CONV]  # nested ops share their parent's stack
    assert got["aten::relu"] == [CONV, CONV]
    assert got["aten::add"] == ["train.py(3): train_step;train.py(10): <module>",
                                "train.py(20): log;train.py(10): <module>"]
    assert got["aten::mul"] == ["train.py(10): <module>"]
    assert got["aten::zeros"] == [""]
    assert got["aten::mm"] == ["", ""]
    stacks = python_call_stacks(crafted)
    assert len(stacks.stacks) == 4 and stacks.python_events == 15
    assert python_call_stacks(crafted) is stacks  # memoised per table


def test_crafted_operator_view(crafted):
    rows = {r["name"]: r for r in build_operators(crafted)["rows"]}
    assert rows["aten::conv2d"]["has_call_stack"] and rows["aten::add"]["has_call_stack"]
    assert not rows["aten::mm"]["has_call_stack"]
    assert not rows["aten::zeros"]["has_call_stack"]
    conv = build_call_stacks(crafted, "aten::conv2d")["rows"]
    assert [(r["call_stack"], r["calls"], r["host_total_us"]) for r in conv] == [(CONV, 2, 120)]
    add = build_call_stacks(crafted, "aten::add")["rows"]
    assert [(r["call_stack"], r["calls"]) for r in add] == [
        ("train.py(3): train_step;train.py(10): <module>", 1),
        ("train.py(20): log;train.py(10): <module>", 1)]
    shaped = build_call_stacks(crafted, "aten::conv2d", "[[610, 3]]", "operator_input_shape")
    assert [(r["input_shape"], r["call_stack"], r["calls"]) for r in shaped["rows"]] == [
        ("[[610, 3]]", CONV, 1)]
    assert build_call_stacks(crafted, "aten::mm")["rows"] == []
    for frame in CONV.split(";"):  # what the UI posts for jump-to-source
        assert UI_FRAME.match(frame)


def test_frames_without_a_source_location_are_dropped(tmp_path):
    events = [pf("nn.Module: Outer_0", 0, 100, 1, module=1),
              pf("<built-in function len>", 1, 98, 2, 1),
              pf("odd;dir/x.py(3): g", 2, 96, 3, 2),
              pf("<frozen runpy>(88): _run_code", 3, 94, 4, 3),
              pf("nn.Module: Inner_0", 4, 90, 5, 4, module=2),
              cpu_op("aten::add", 10, 5)]
    got = stacks_by_name(make_table(events, tmp_path))
    assert got["aten::add"] == ["<frozen runpy>(88): _run_code;odd,dir/x.py(3): g"]
    only_builtins = [pf("<built-in method foo of X object at 0x1>", 0, 10, 1),
                     cpu_op("aten::add", 1, 5)]
    table = make_table(only_builtins, tmp_path)
    assert stacks_by_name(table)["aten::add"] == [""]
    assert not build_operators(table)["rows"][0]["has_call_stack"]


def test_depth_is_capped_innermost_first(tmp_path):
    depth = MAX_FRAMES + 36
    events = [pf(f"deep.py({i}): f{i}", i, 1000 - 2 * i, 10 + i, 9 + i if i else None)
              for i in range(depth)]
    events.append(cpu_op("aten::add", depth + 1, 5))
    (stack,) = stacks_by_name(make_table(events, tmp_path))["aten::add"]
    frames = stack.split(";")
    assert len(frames) == MAX_FRAMES
    assert frames[0] == f"deep.py({depth - 1}): f{depth - 1}"
    assert frames[-1] == f"deep.py({depth - MAX_FRAMES}): f{depth - MAX_FRAMES}"


def test_overhanging_child_and_boundaries(tmp_path):
    """A frame ending a little after its parent (rounded timestamps) is clamped into it; an op
    starting exactly where a frame ends is outside it; one starting where it starts, inside."""
    events = [pf("a.py(1): outer", 0, 100, 1),
              pf("a.py(5): inner", 50, 50.25, 2, 1),
              cpu_op("aten::mul", 50, 10),
              pf("a.py(9): done", 0, 20, 3, 1),
              cpu_op("aten::add", 20, 10),
              cpu_op("aten::div", 100.125, 0.1)]  # in the overhang: outside both
    got = stacks_by_name(make_table(sorted(events, key=lambda e: e["ts"]), tmp_path))
    assert got["aten::mul"] == ["a.py(5): inner;a.py(1): outer"]
    assert got["aten::add"] == ["a.py(1): outer"]
    assert got["aten::div"] == [""]


def test_recorded_stacks_win(tmp_path):
    """A trace with 1.x `Call stack` args keeps them, python events or not."""
    events = [pf("train.py(3): step", 0, 100, 1),
              cpu_op("aten::mm", 10, 10, **{"Call stack": "x.py(1): f;y.py(2): g"}),
              cpu_op("aten::add", 30, 10)]
    table = make_table(events, tmp_path)
    rows = {r["name"]: r for r in build_operators(table)["rows"]}
    assert rows["aten::mm"]["has_call_stack"] and not rows["aten::add"]["has_call_stack"]
    assert [r["call_stack"] for r in build_call_stacks(table, "aten::mm")["rows"]] == [
        "x.py(1): f;y.py(2): g"]


def test_no_python_events(tmp_path):
    table = make_table([cpu_op("aten::add", 0, 5)], tmp_path)
    stacks = python_call_stacks(table)
    assert len(stacks) == 1 and stacks.code.tolist() == [-1] and len(stacks.stacks) == 0
    assert stacks.of_rows(np.array([0, 5])).tolist() == ["", ""]


# --- recorded samples (torch 2.x, with_stack=True) ------------------------------------------

def _read(path):
    with gzip.open(path) as handle:
        return json.load(handle)


def _id_chain_stacks(path):
    """Reference implementation, plain Python: innermost python event open at each op's
    start (same thread), then up the `Python parent id` chain, keeping file(line) frames."""
    events = _read(path)["traceEvents"]
    python = [e for e in events if e.get("cat") == "python_function" and e.get("ph") == "X"]
    by_id = {e["args"]["Python id"]: e for e in python}
    out = []
    for op in events:
        if op.get("cat") not in ("cpu_op", "user_annotation") or op.get("ph") != "X":
            continue
        open_ = [e for e in python if (e["pid"], e["tid"]) == (op["pid"], op["tid"])
                 and e["ts"] <= op["ts"] < e["ts"] + e["dur"]]
        frames = []
        event = max(open_, key=lambda e: (e["ts"], -e["dur"])) if open_ else None
        while event is not None:
            if FRAME_RE.match(event["name"]):
                frames.append(event["name"])
            event = by_id.get(event["args"]["Python parent id"])
        out.append((op["name"], op["ts"], ";".join(frames[:MAX_FRAMES])))
    return sorted(out)


@pytest.mark.parametrize("path", [*CNN, *sorted((SAMPLES / "ddp_gloo").glob("*rank0*.gz"))[:1]],
                         ids=lambda p: p.name)
def test_sample_matches_python_id_chains(path):
    """The time nesting agrees with the tracer's own parent ids on real 2.x traces (some
    with frames ending after their parent's end, and a second thread: gloo's)."""
    table = load_trace(str(path), use_cache=False)
    stacks = python_call_stacks(table)
    events = table.events
    ours = sorted(zip(events["name"].to_numpy()[stacks.rows].astype(str),
                      events["ts"].to_numpy()[stacks.rows],
                      [stacks.stacks[c] if c >= 0 else "" for c in stacks.code]))
    assert ours == _id_chain_stacks(path)


@pytest.mark.parametrize("path", CNN, ids=lambda p: p.name)
def test_sample_conv2d_stacks_reach_the_training_step(path):
    table = load_trace(str(path), use_cache=False)
    rows = {r["name"]: r for r in build_operators(table)["rows"]}
    conv = rows["aten::conv2d"]
    assert conv["has_call_stack"]
    stacks = build_call_stacks(table, "aten::conv2d")["rows"]
    assert sum(r["calls"] for r in stacks) == conv["calls"]  # every call has a stack
    for row in stacks:
        frames = row["call_stack"].split(";")
        assert all(UI_FRAME.match(f) for f in frames)
        assert frames[0].startswith("torch/nn/modules/conv.py(")  # innermost first
        assert frames[-1].endswith(": <module>")
        assert any(re.fullmatch(r"make_samples\.py\(\d+\): train", f) for f in frames)
        assert not any("nn.Module:" in f or "<built-in" in f for f in frames)
    with_stack = [r for r in rows.values() if r["has_call_stack"]]
    assert len(with_stack) >= 0.9 * len(rows)  # the main thread runs everything from Python


def test_scaled_sample_keeps_its_stacks(tmp_path):
    """The sample repeated 8 times (shifted in time, fresh Python ids): the same distinct
    stacks, each op 8 times as often."""
    document = _read(CNN[0])
    events = document["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    span = max(e["ts"] + e.get("dur", 0) for e in complete) - min(e["ts"] for e in complete)
    scaled = []
    for copy in range(8):
        for event in events:
            if event.get("ph") != "X":
                if copy == 0:
                    scaled.append(event)
                continue
            event = {**event, "ts": event["ts"] + copy * (span + 10)}
            if event.get("cat") == "python_function":
                args = dict(event["args"])
                for key in ("Python id", "Python parent id"):
                    if args.get(key) is not None:
                        args[key] += copy * 1_000_000
                event["args"] = args
            scaled.append(event)
    path = tmp_path / "scaled.pt.trace.json"
    path.write_text(json.dumps({**document, "traceEvents": scaled}))
    one = python_call_stacks(load_trace(str(CNN[0]), use_cache=False))
    many = python_call_stacks(load_trace(str(path), use_cache=False))
    assert sorted(many.stacks) == sorted(one.stacks)
    count = np.bincount(many.code[many.code >= 0], minlength=len(many.stacks))
    base = np.bincount(one.code[one.code >= 0], minlength=len(one.stacks))
    assert dict(zip(many.stacks, count)) == {s: 8 * n for s, n in zip(one.stacks, base)}


@pytest.mark.parametrize("n_ids", [3, 60])  # a dense table, then sparse keys (a sort)
def test_thread_groups_are_shared_dense_and_ordered(n_ids):
    rng = np.random.default_rng(n_ids)
    ids = [str(i) for i in range(n_ids)]
    n = 50
    events = pd.DataFrame({
        "pid": pd.Categorical(rng.choice(ids, size=n), categories=ids),
        "tid": pd.Categorical(rng.choice(ids, size=n), categories=ids)})
    space = (n_ids + 1) ** 2
    assert (space > 4 * n + 1024) == (n_ids == 60)
    py_rows, op_rows = np.arange(0, 20), np.arange(15, 50)  # overlapping row sets
    py_group, op_group = _threads(events, py_rows, op_rows)
    keys = sorted({(int(events["pid"].cat.codes[r]), int(events["tid"].cat.codes[r]))
                   for r in np.concatenate((py_rows, op_rows))})
    number = {k: i for i, k in enumerate(keys)}

    def expected(rows):
        return [number[(int(events["pid"].cat.codes[r]), int(events["tid"].cat.codes[r]))]
                for r in rows]

    assert py_group.tolist() == expected(py_rows)
    assert op_group.tolist() == expected(op_rows)
