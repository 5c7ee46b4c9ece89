"""Every view of the registry answers on every trace we have: samples/, tiny CPU recordings of
each convolution shape that broke the FLOPs estimate, and ../shared/traces (real PyTorch 1.x and
2.x, CUDA and ROCm traces). Each view is built the way the server builds it
(`views.registry.build_view`: the spec's builder after option validation) and encoded as the
server encodes it; an answer is a payload or one of the errors the server maps to 4xx
(`OptionError`, `NotInTrace`), never any other exception (the server's 500).

The real-TensorBoard pass over HTTP is tests/server/test_view_corpus_http.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tb_plugin import cli
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.views.errors import NotInTrace, OptionError
from tb_plugin.views.registry import SPECS, build_view
from tb_plugin.views.spec import PAIR, SPAN, TABLE
from tests.support import SAMPLES, SHARED_TRACES, import_torch, needs_shared
from tests.support.conv_traces import CONV_CASES, record_conv_traces

#: Views that read no trace (a memory-timeline export, an allocator snapshot): not run here.
NOT_TRACE_VIEWS = frozenset(("memory_timeline", "memory_snapshot"))


def _required_options(table: Any, name: str) -> dict[str, Any]:
    if name == "operator_stack":
        rows = plain(build_view(table, "operators"))["rows"]
        return {"name": rows[0]["name"] if rows else "aten::mm"}
    if name == "timeline_event":
        return {"event_id": 0}
    if name == "timeline_search":
        return {"query": "aten"}
    if name == "whatif":
        return {"edit": "launch=0; sync=0; op~^aten::=0.5; dataloader=0"}
    if name == "whatif_run":
        return {"edit": "straggler=0; transfer=0"}
    if name == "timeline_range":
        whole = plain(build_view(table, "timeline", width=200))
        return {"start_us": whole["trace_start_us"],
                "end_us": max(whole["trace_end_us"], whole["trace_start_us"] + 1)}
    return {}


def every_view(table: Any, worker: str) -> dict[str, str]:
    """View name -> "ok" or the 4xx error class it answered; any other exception propagates."""
    answers = {}
    for name, spec in SPECS.items():
        if name in NOT_TRACE_VIEWS:
            continue
        try:
            if spec.kind == TABLE:
                payload = build_view(table, name, **_required_options(table, name))
            elif spec.kind == SPAN:
                payload = build_view({worker: table}, name, {},
                                     **_required_options(table, name))
            else:
                assert spec.kind == PAIR, name
                payload = build_view(table, name, table)
            json.dumps(plain(payload))
            answers[name] = "ok"
        except (OptionError, NotInTrace) as exc:
            answers[name] = type(exc).__name__
    return answers


def _sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.glob("*/*.json.gz") if ".raw." not in p.name)


def _shared_files() -> list[Path]:
    """Every trace under ../shared/traces, graph-capture subfolders and plain .json included."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.rglob("*.pt.trace.json*"))


def _rel(path: Path) -> str:
    return path.relative_to(path.parents[1]).as_posix()


@pytest.mark.parametrize("path", _sample_files(), ids=_rel)
def test_every_view_answers_on_every_sample(path: Path) -> None:
    answers = every_view(load_trace(str(path), use_cache=False), "w")
    assert answers["overview"] == answers["roofline"] == answers["gpu_idle"] == "ok"


@needs_shared
@pytest.mark.parametrize("path", _shared_files(),
                         ids=lambda p: p.relative_to(SHARED_TRACES).as_posix())
def test_every_view_answers_on_every_shared_trace(path: Path) -> None:
    answers = every_view(load_trace(str(path), use_cache=False), "w")
    assert answers["overview"] == answers["roofline"] == answers["gpu_idle"] == "ok"


@pytest.fixture(scope="module")
def conv_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return record_conv_traces(import_torch(), tmp_path_factory.mktemp("conv"))


@pytest.mark.e2e  # records with torch
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_fixtures_answer_and_count_right(conv_traces: dict[str, Path], case: str) -> None:
    """Each CPU conv fixture: every view answers, and the Roofline row of its convolution has
    the FLOPs derived by hand (per call times calls), with no reason."""
    table = load_trace(str(conv_traces[case]), use_cache=False)
    answers = every_view(table, "w")
    assert answers["overview"] == answers["roofline"] == answers["gpu_idle"] == "ok"
    op, per_call, calls = CONV_CASES[case]
    [row] = [r for r in plain(build_view(table, "roofline"))["rows"] if r["name"] == op]
    assert (row["calls"], row["flops"], row["flops_reason"]) == (calls, per_call * calls, None)
    assert row["estimate"] is True and math.isfinite(row["bytes"])


def test_a_failed_estimate_keeps_its_row_and_reason(tmp_path: Path) -> None:
    """A PyTorch 1.x-style convolution (no Concrete Inputs) cannot be sized: its Roofline row
    stays, FLOPs null, with the reason; the view still answers."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 10,
         "dur": 50, "args": {"Input Dims": [[2, 3, 9, 9], [4, 3, 3, 3], [], [], [], [], []],
                             "Input type": ["float", "float", "", "GenericList",
                                            "GenericList", "GenericList", "Int"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100,
         "dur": 20, "args": {"Input Dims": [[4, 5], [5, 6]], "Input type": ["float", "float"]}},
    ]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table = load_trace(str(path), use_cache=False)
    assert every_view(table, "w")["roofline"] == "ok"
    rows = {r["name"]: r for r in plain(build_view(table, "roofline"))["rows"]}
    assert rows["aten::conv2d"]["flops"] is None
    assert rows["aten::conv2d"]["flops_reason"] == (
        "stride not recorded (the trace has no Concrete Inputs for it)")
    assert (rows["aten::mm"]["flops"], rows["aten::mm"]["flops_reason"]) == (2 * 4 * 5 * 6, None)


def test_unreadable_device_properties_cost_the_peaks_not_the_views(tmp_path: Path) -> None:
    """A GPU trace whose deviceProperties hold a string memory size: the peak matching cannot
    read it, so vendor/architecture/peaks (hence bound and MFU) are null with the reason, and
    every view answers; the FLOPs of the GEMM are still counted."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
         "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
         "dur": 50, "args": {"Input Dims": [[4, 5], [5, 6]], "Input type": ["float", "float"],
                             "External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 20, "dur": 5, "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 20,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
    ]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": "80 GB"}]}))
    table = load_trace(str(path), use_cache=False)
    answers = every_view(table, "w")
    assert answers["overview"] == answers["roofline"] == answers["gpu_idle"] == "ok"
    roofline = plain(build_view(table, "roofline"))
    assert roofline["device"]["peaks_model"] is None
    assert roofline["device"]["peaks_reason"] == (
        "device properties not understood: TypeError: unsupported operand type(s) for /: "
        "'str' and 'float'")
    [row] = roofline["rows"]
    assert (row["name"], row["flops"], row["bound"]) == ("aten::mm", 2 * 4 * 5 * 6, None)
    [gpu] = plain(build_view(table, "overview"))["gpus"]
    assert (gpu["mfu_pct"], gpu["peaks_reason"]) == (None, roofline["device"]["peaks_reason"])


@pytest.mark.e2e  # records with torch
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_cli_reports_the_conv_fixtures(conv_traces: dict[str, Path], case: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI (main printed a ZeroDivisionError traceback on the 1x1 convolution): exit 0 and
    the hand-derived FLOPs in `report --view roofline`."""
    logdir = str(conv_traces[case].parents[1])
    for view in ("overview", "gpu_idle"):
        assert cli.main(["report", logdir, "--run", case, "--view", view]) == 0
    capsys.readouterr()
    assert cli.main(["report", logdir, "--run", case, "--view", "roofline",
                     "--format", "json"]) == 0
    out, err = capsys.readouterr()
    op, per_call, calls = CONV_CASES[case]
    [row] = [r for r in json.loads(out)["rows"] if r["name"] == op]
    assert row["flops"] == per_call * calls and "Traceback" not in err
