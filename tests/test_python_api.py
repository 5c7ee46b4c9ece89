"""The public Python API (`tb_plugin.api`): its frames against numbers derived by hand from a
small generated trace (the oracle), against the payloads the CLI prints for samples/ (wiring:
every row and number of the same span), its errors, and the README example run as written."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import pytest

from tb_plugin import cli
from tb_plugin.api import NotFoundError, UnreadableTraceError, open_logdir, open_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

README = Path(__file__).resolve().parents[1] / "README.md"
GEMM, RELU = "my_gemm_kernel", "my_relu_kernel"


# -- the oracle: a trace small enough to work out by hand ------------------------------------------


def _op(name: str, ts: float, dur: float, ext: int, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 7, "ts": ts, "dur": dur,
            "args": {"External id": ext}}


def _launch(ts: float, dur: float, corr: int, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 7,
            "ts": ts, "dur": dur, "args": {"correlation": corr, "external id": ext}}


def _kernel(name: str, ts: float, dur: float, corr: int, ext: int) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr, "external id": ext}}


def _memory(ts: float, addr: int, size: int, total: int) -> dict[str, Any]:
    return {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
            "tid": 7, "ts": ts, "args": {"Device Type": 1, "Device Id": 0, "Addr": addr,
                                         "Bytes": size, "Total Allocated": total}}


#: Step 1 [90, 160]: linear [100, 150] > addmm [110, 140] > launch [115, 120] -> gemm [120, 130].
#: Step 2 [190, 350]: relu [200, 220] > launch [205, 209] -> relu kernel [210, 213];
#:                    linear [300, 340] > addmm [305, 325] > launch [310, 315] -> gemm [315, 321].
#: GPU0 memory: 1024 B allocated in addmm at 112 and freed in linear at 330; 512 B in relu at 212.
HAND_TRACE = [
    _op("ProfilerStep#1", 90, 70, 1, cat="user_annotation"),
    _op("aten::linear", 100, 50, 2), _op("aten::addmm", 110, 30, 3), _launch(115, 5, 10, 3),
    _kernel(GEMM, 120, 10, 10, 3),
    _op("ProfilerStep#2", 190, 160, 4, cat="user_annotation"),
    _op("aten::relu", 200, 20, 5), _launch(205, 4, 11, 5), _kernel(RELU, 210, 3, 11, 5),
    _op("aten::linear", 300, 40, 6), _op("aten::addmm", 305, 20, 7), _launch(310, 5, 12, 7),
    _kernel(GEMM, 315, 6, 12, 7),
    _memory(112, 0xA00, 1024, 1024), _memory(212, 0xB00, 512, 1536),
    _memory(330, 0xA00, -1024, 512),
]


@pytest.fixture()
def hand_logdir(tmp_path: Path) -> Path:
    """Run "hand" with worker w0 (the oracle trace as span 1, an unreadable span 2) and run
    "other" (the same trace)."""
    document = json.dumps({"schemaVersion": 1, "traceEvents": HAND_TRACE})
    for run in ("hand", "other"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "w0.100.pt.trace.json").write_text(document)
    (tmp_path / "hand" / "w0.200.pt.trace.json").write_text("not json at all")
    return tmp_path


def test_operators_by_hand(hand_logdir: Path) -> None:
    """Self time is the op's duration less its child ops and its own launches; device self time
    is the kernels it launched itself. Rows sort by device self time, ties by name."""
    ops = open_logdir(str(hand_logdir)).trace("hand").operators()
    columns = ["name", "calls", "host_total_us", "host_self_us", "device_total_us",
               "device_self_us"]
    assert ops[columns].values.tolist() == [
        ["aten::addmm", 2, 30 + 20, (30 - 5) + (20 - 5), 10 + 6, 10 + 6],
        ["aten::relu", 1, 20, 20 - 4, 3, 3],
        ["aten::linear", 2, 50 + 40, (50 - 30) + (40 - 20), 10 + 6, 0],
    ]
    assert ops["tc_self_pct"].tolist() == [0, 0, 0]


def test_kernels_by_hand(hand_logdir: Path) -> None:
    trace = open_logdir(str(hand_logdir)).trace("hand", "w0", "1")
    kernels = trace.kernels()
    columns = ["name", "tensor_cores", "calls", "total_us", "mean_us", "max_us", "min_us"]
    assert kernels[columns].values.tolist() == [[GEMM, False, 2, 16, 8, 10, 6],
                                                [RELU, False, 1, 3, 3, 3, 3]]
    # no launch configuration and no device properties: nothing to derive them from
    assert kernels[["blocks_per_sm", "occupancy_pct"]].isna().all().all()
    by_op = trace.kernels(group_by="kernel_op_launch")
    assert by_op[["name", "operator", "grid", "block", "calls", "total_us"]].values.tolist() == [
        [GEMM, "aten::addmm", None, None, 2, 16], [RELU, "aten::relu", None, None, 1, 3]]
    assert by_op["registers_per_thread"].isna().all()


def test_steps_by_hand(hand_logdir: Path) -> None:
    """Each step's time goes to the highest-priority busy category: kernel, then runtime (the
    launches), then CPU exec (the ops), the rest is other."""
    steps = open_trace(str(hand_logdir / "hand" / "w0.100.pt.trace.json")).steps()
    assert steps["step"].tolist() == ["1", "2"]
    assert steps[["start_us", "end_us", "total_us"]].values.tolist() == [[90, 160, 70],
                                                                       [190, 350, 160]]
    assert steps["kernel_us"].tolist() == [10, 3 + 6]
    assert steps["runtime_us"].tolist() == [5, 4 + 5]
    assert steps["cpu_exec_us"].tolist() == [50 - 10 - 5, (20 - 3 - 4) + (40 - 5 - 6)]
    assert steps["other_us"].tolist() == [70 - 50, 160 - 9 - 9 - 42]
    zero = ["memcpy_us", "memset_us", "communication_us", "dataloader_us"]
    assert steps[zero].values.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0]]


def test_memory_by_hand(hand_logdir: Path) -> None:
    trace = open_logdir(str(hand_logdir)).trace("other")
    assert trace.memory_devices() == ["GPU0"]
    events = trace.memory_events(device="GPU0")
    assert events[["device", "op", "bytes", "alloc_t_us"]].values.tolist() == [
        ["GPU0", "aten::addmm", 1024, 112], ["GPU0", "aten::relu", 512, 212]]
    assert events["free_t_us"].tolist()[0] == 330 and math.isnan(events["free_t_us"][1])
    assert events["duration_us"].tolist()[0] == 330 - 112 and math.isnan(
        events["duration_us"][1])
    stats = trace.memory_operators()
    assert stats.drop(columns="device").values.tolist() == [
        # name, calls, self increase/alloc bytes/alloc count, then the same with children
        ["aten::addmm", 2, 1024, 1024, 1, 1024, 1024, 1],
        ["aten::linear", 2, -1024, 0, 0, 1024 - 1024, 1024, 1],
        ["aten::relu", 1, 512, 512, 1, 512, 512, 1],
    ]
    assert trace.memory_events(start_us=300, end_us=400)["bytes"].tolist() == [1024]


def test_names_and_errors(hand_logdir: Path) -> None:
    logdir = open_logdir(str(hand_logdir), use_cache=False)
    assert logdir.runs() == ["hand", "other"]
    assert logdir.workers("hand") == ["w0"]
    assert logdir.spans("hand") == ["1", "2"]
    trace = logdir.trace("hand", span="1")
    assert (trace.run, trace.worker, trace.span) == ("hand", "w0", "1")
    with pytest.raises(NotFoundError, match=r"no run 'nope' .*runs: hand, other"):
        logdir.trace("nope")
    with pytest.raises(NotFoundError, match=r"no worker 'w9' .*workers: w0"):
        logdir.spans("hand", "w9")
    with pytest.raises(NotFoundError, match=r"no span '7' .*spans: 1, 2"):
        logdir.trace("hand", span="7")
    with pytest.raises(KeyError, match=r"has span '7'; spans: 1, 2"):  # a NotFoundError
        logdir.collectives("hand", span="7")
    with pytest.raises(UnreadableTraceError, match="w0.200.pt.trace.json"):
        logdir.trace("hand", span="2")
    with pytest.raises(UnreadableTraceError, match="no worker of span '2' could be read"):
        logdir.collectives("hand", span="2")
    with pytest.raises(ValueError, match="group_by must be one of"):
        trace.operators(group_by="kernel")
    with pytest.raises(KeyError, match=r"device 'GPU7'; devices: GPU0"):
        trace.memory_events(device="GPU7")
    with pytest.raises(KeyError, match="no operator 'aten::nope'"):
        trace.call_stacks("aten::nope")


# -- wiring: every frame equals the payload the CLI (and the server) gives for the same span -------


def _payload(capsys: pytest.CaptureFixture[str], logdir: Path, run: str, view: str,
             *options: str) -> dict[str, Any]:
    assert cli.main(["report", str(logdir), "--run", run, "--view", view, *options]) == 0
    return json.loads(capsys.readouterr().out)


def _spans(logdir: Path) -> list[tuple[str, str, str]]:
    api = open_logdir(str(logdir))
    return [(run, worker, span) for run in api.runs() for worker in api.workers(run)
            for span in api.spans(run, worker)]


def _same(got: Any, want: Any, decimals: Optional[int]) -> bool:
    """`got` (a frame cell) shows as `want` (a payload value): null is NaN or None; with
    `decimals`, the frame holds the unrounded value of a payload rounded to that many places."""
    if want is None:
        return got is None or (isinstance(got, float) and math.isnan(got))
    if decimals is not None and isinstance(want, float):
        return abs(got - want) <= 0.5 * 10 ** -decimals + 1e-9
    return bool(got == want)


def _assert_rows(frame: pd.DataFrame, rows: list[dict[str, Any]],
                 decimals: Optional[dict[str, int]] = None, nonempty: bool = True) -> None:
    """Same rows in the same order, same columns, every cell the payload's."""
    assert len(frame) == len(rows) and (len(rows) > 0 or not nonempty)
    for got, want in zip(frame.to_dict("records"), rows):
        assert list(got) == list(want)
        for key, value in want.items():
            assert _same(got[key], value, (decimals or {}).get(key)), (key, got, want)


OPERATOR_DECIMALS = dict.fromkeys(("host_self_us", "host_total_us", "device_self_us",
                                   "device_total_us"), 3)
KERNEL_DECIMALS = {**dict.fromkeys(("total_us", "mean_us", "max_us", "min_us"), 3),
                   "blocks_per_sm": 2, "occupancy_pct": 2}


def _assert_operators_and_kernels(capsys, logdir: Path, run: str, worker: str, span: str
                                  ) -> None:
    trace = open_logdir(str(logdir)).trace(run, worker, span)
    where = ("--worker", worker, "--span", span)
    for group_by in ("operator", "operator_input_shape"):
        payload = _payload(capsys, logdir, run, "operators", *where, "--group-by", group_by)
        _assert_rows(trace.operators(group_by), payload["rows"], OPERATOR_DECIMALS)
    for group_by in ("kernel", "kernel_op_launch"):
        payload = _payload(capsys, logdir, run, "kernels", *where, "--group-by", group_by)
        # the samples ran on CPU (no kernels); the shared GPU traces have rows
        _assert_rows(trace.kernels(group_by), payload["rows"], KERNEL_DECIMALS, nonempty=False)


@pytest.mark.parametrize("run,worker,span", _spans(SAMPLES))
def test_frames_equal_payloads_on_samples(capsys, run: str, worker: str, span: str) -> None:
    _assert_operators_and_kernels(capsys, SAMPLES, run, worker, span)
    trace = open_logdir(str(SAMPLES)).trace(run, worker, span)
    where = ("--worker", worker, "--span", span)

    overview = _payload(capsys, SAMPLES, run, "overview", *where)
    _assert_rows(trace.steps(), [_step_row(step, trace) for step in overview["steps"]])

    for device in [None, *trace.memory_devices()]:
        options = () if device is None else ("--device", device)
        memory = _payload(capsys, SAMPLES, run, "memory", *where, *options)
        _assert_rows(trace.memory_events(device), memory["events"]["rows"])
        _assert_rows(trace.memory_operators(device), memory["operators"]["rows"])

    modules = _payload(capsys, SAMPLES, run, "modules", *where)
    assert modules["available"]
    frame = trace.modules()
    _assert_rows(frame, _module_rows(modules["rows"], frame.columns))


def _step_row(step: dict[str, Any], trace: Any) -> dict[str, Any]:
    """A payload step as the frame's row (start/end from the frame: the payload has none)."""
    frame = trace.steps().set_index("step")
    row = {"step": step["name"], "start_us": frame.at[step["name"], "start_us"],
           "end_us": frame.at[step["name"], "end_us"], "total_us": step["total_us"]}
    return {**row, **{f"{c.lower().replace(' ', '_')}_us": v
                      for c, v in step["breakdown_us"].items()}}


def _module_rows(rows: list[dict[str, Any]], columns: pd.Index, parent: Optional[str] = None,
                 depth: int = 0) -> list[dict[str, Any]]:
    """The payload's module tree depth first, with the frame's columns (absent cells None)."""
    out = []
    for row in rows:
        flat = {"key": row["key"], "parent_key": parent, "depth": depth, **row}
        out.append({c: flat.get(c, 0 if c == "missing_calls" else None) for c in columns})
        out += _module_rows(row["children"], columns, row["key"], depth + 1)
    return out


@pytest.mark.parametrize("span", ["1", "2"])
def test_collectives_equal_the_distributed_payload(capsys, span: str) -> None:
    payload = _payload(capsys, SAMPLES, "ddp_gloo", "distributed", "--span", span)
    rows = [{"worker": worker, **row} for worker in sorted(payload["comm_ops"])
            for row in payload["comm_ops"][worker]["rows"]]
    assert len(rows) >= 4 and payload["skipped"] == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no worker left out, so no warning
        _assert_rows(open_logdir(str(SAMPLES)).collectives("ddp_gloo", span=span), rows)


def _shared_runs() -> list[tuple[str, str, str]]:
    if not SHARED_TRACES.is_dir():
        return []
    api = open_logdir(str(SHARED_TRACES), use_cache=False)
    return [(run, api.workers(run)[0], api.spans(run)[0]) for run in api.runs()
            if api.workers(run)]


@needs_shared
@pytest.mark.parametrize("run,worker,span", _shared_runs())
def test_operator_and_kernel_frames_equal_payloads_on_shared_traces(capsys, run: str,
                                                                     worker: str,
                                                                     span: str) -> None:
    """The samples ran on CPU: real GPU traces give the kernel table rows."""
    _assert_operators_and_kernels(capsys, SHARED_TRACES, run, worker, span)


# -- the README example, as written ----------------------------------------------------------------


def test_readme_example_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    section = README.read_text(encoding="utf-8").split("\n## Python API\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(README.parent)  # the example opens "samples" relative to the checkout
    exec(compile(code.group(1), str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "['cnn_bs32', 'cnn_bs64', 'compiled_cpu', 'ddp_gloo']" in out
    assert "gloo:all_reduce" in out and "aten::convolution_backward" in out
