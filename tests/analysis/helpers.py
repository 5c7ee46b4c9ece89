"""Shared test helpers for the analysis tests: build a `TraceTable` from a few event dicts, and
the event factories several test modules use (test modules never import each other)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from tb_plugin.analysis.distributed.match import match, with_waits
from tb_plugin.ingest import TraceTable
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES

_counter = itertools.count()


def make_table(events: list[dict[str, Any]], tmp_path: Path, **top_level: Any) -> TraceTable:
    """Write `{"traceEvents": events, **top_level}` as a trace file and parse it (no cache).

    `top_level` takes the document's other keys verbatim, e.g. `deviceProperties=[...]`,
    `distributedInfo={...}`, `Framework="pytorch-lightning"`.
    """
    document = {"schemaVersion": 1, **top_level, "traceEvents": events}
    path = Path(tmp_path) / f"worker{next(_counter)}.pt.trace.json"
    path.write_text(json.dumps(document))
    return load_trace(str(path), use_cache=False)


def trace_files() -> list[Path]:
    """Every real trace file (not the raw memory-timeline export), sorted."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.glob("*/*.pt.trace.json*")
                  if "memory_timeline" not in p.name)


# Event factories (legacy-free PyTorch 1.9+ spelling; pass extra args as keyword arguments).
CPU_PID, CPU_TID = 100, 200


def cpu_op(name: str, ts: float, dur: float, ext: int | None = None, *, cat: str = "cpu_op",
           tid: Any = CPU_TID, **args: Any) -> dict[str, Any]:
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def runtime(ts: float, dur: float, corr: int, ext: int = 0, *, name: str = "cudaLaunchKernel",
            cat: str = "cuda_runtime", tid: Any = CPU_TID) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": tid, "ts": ts,
            "dur": dur, "args": {"correlation": corr, "external id": ext}}


def device_event(cat: str, name: str, ts: float, dur: float, corr: int | None = None,
                 ext: int = 0, *, device: int | None = 0, stream: int = 7, **args: Any
                 ) -> dict[str, Any]:
    """A kernel / gpu_memcpy / gpu_memset; pid is the device (as Kineto writes it)."""
    base: dict[str, Any] = {"stream": stream, "external id": ext}
    if corr is not None:
        base["correlation"] = corr
    if device is not None:
        base["device"] = device
    return {"ph": "X", "cat": cat, "name": name, "pid": device if device is not None else 0,
            "tid": stream, "ts": ts, "dur": dur, "args": {**base, **args}}


def kernel(ts: float, dur: float, corr: int | None = None, ext: int = 0, *,
           name: str = "void gemm_kernel<float>()", **args: Any) -> dict[str, Any]:
    return device_event("kernel", name, ts, dur, corr, ext, **args)


def memcpy(ts: float, dur: float, corr: int | None = None, ext: int = 0, **args: Any
           ) -> dict[str, Any]:
    return device_event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", ts, dur, corr, ext,
                        **args)


def memset(ts: float, dur: float, corr: int | None = None, ext: int = 0, **args: Any
           ) -> dict[str, Any]:
    return device_event("gpu_memset", "Memset (Device)", ts, dur, corr, ext, **args)


def step(number: Any, ts: float, dur: float, *, cat: str = "user_annotation", **kw: Any
         ) -> dict[str, Any]:
    return cpu_op(f"ProfilerStep#{number}", ts, dur, cat=cat, **kw)


# Python tracer events and forward/backward flows (the Module and Diff views).


def py(name: str, ts: float, dur: float | None, python_id: int, parent: int | None = None,
       module: int | None = None, tid: Any = CPU_TID) -> dict[str, Any]:
    args: dict[str, Any] = {"Python id": python_id, "Python thread": 0}
    if parent is not None:
        args["Python parent id"] = parent
    if module is not None:
        args["Python module id"] = module
    event = {"ph": "X", "cat": "python_function", "name": name, "pid": CPU_PID, "tid": tid,
             "ts": ts, "args": args}
    if dur is not None:
        event["dur"] = dur
    return event


def flow(ph: str, flow_id: int, ts: float, tid: Any = CPU_TID) -> dict[str, Any]:
    event = {"ph": ph, "cat": "fwdbwd", "name": "fwdbwd", "id": flow_id, "pid": CPU_PID,
             "tid": tid, "ts": ts}
    if ph == "f":
        event["bp"] = "e"
    return event


def overlap_events() -> list[dict[str, Any]]:
    """Two steps whose device work overlaps the next step and the gap before it (steps and
    breakdown tests)."""
    return [
        step(1, 100, 200), step(2, 350, 150),
        runtime(90, 20, corr=123, name="cudaMemcpyAsync"), memcpy(150, 90, corr=123),
        cpu_op("aten::to", 200, 55, ext=2),
        runtime(205, 5, corr=40, ext=2), kernel(275, 105, corr=40),
        cpu_op("aten::mm", 360, 50, ext=4),
        runtime(380, 5, corr=41, ext=4), kernel(410, 200, corr=41),
    ]


# Collective calls as `distributed/match.py` reads them (one row per rank's call).
CALL_COLUMNS = ["w", "call", "group", "name", "collective", "seq", "d", "bytes", "out_bytes",
                "group_size", "dtype", "step_name"]


def collective_call(w: int, call: int, name: str, seq: int, d: float, step: str = "1", *,
                    nbytes: float = 100.0, out: float = math.nan, size: float = math.nan,
                    dtype: str = "float", group: str = "g") -> tuple:
    """Rank `w`'s `call`-th call of collective `name` ("nccl:<collective>"), `d` us long."""
    return (w, call, group, name, name.split(":")[1], seq, d, nbytes, out, size, dtype, step)


def collective_frames(rows: list[tuple], world: Any = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(matched collectives, keyed calls) of `collective_call` rows, by the real matcher."""
    calls = pd.DataFrame(rows, columns=CALL_COLUMNS)
    matched = match(calls, {}, world)
    return matched, with_waits(calls, matched)
