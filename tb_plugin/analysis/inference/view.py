"""The Inference view's payload (`build_inference`): serving steps, the steady-state window
(`steps.py`), per-phase time by op category (`op_categories.device_categories`), per-token
latency and memory-bandwidth utilization (`bandwidth.py`). Its shape:
`views.inference.payload.InferencePayload`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ...views.inference.payload import InferencePayload
from ..device_work import device_work
from ..efficiency.roofline import device_info
from ..graph_launches import replayed_mask
from ..graphs import merge_capture
from ..op_categories import CATEGORIES, device_categories
from .annotations import DECODE, PHASES
from .bandwidth import graph_note, step_bytes
from .steps import CAPTURE, SKIPPED_IDLE, STEADY, WARMUP, WARMUP_FACTOR, serving_steps

MAX_STEPS = 5000
FORMULAS = {
    "phase": "prefill: context requests only; decode: generation requests only; mixed: both "
             "(from the step annotation: vLLM execute_<T>_context_<C>(..)_generation_<G>(..), "
             "SGLang step[<MODE> bs=.. toks=..])",
    "time": "per step: the union of the intervals of the kernels, copies and sets launched "
            "inside its host annotation (GPU busy time), else the annotation's length",
    "steady": f"left out: graph-capture steps, idle steps, and each phase's leading steps "
              f"over {WARMUP_FACTOR:g}x the median step time of that phase (warm-up)",
    "latency": "us per token = step time / tokens; decode inter-token latency = mean decode "
               "step time (each running request gets one token per decode step)",
    "bandwidth": "bytes = GEMM weights (aten::mm/addmm weight operand) + KV read (Σ N_KV x "
                 "K+V bytes per token of the step's KV-cache writes); not estimable without "
                 "those shapes or when GEMM kernels come from another operator (a fused MoE); "
                 "utilization = bytes / GPU busy time / peak HBM bandwidth",
}


def serving_step_count(table: TraceTable) -> int:
    """Serving steps in the trace (0: not a serving trace)."""
    return int(len(serving_steps(table)))


def build_inference(table: TraceTable, capture: Optional[TraceTable] = None
                    ) -> InferencePayload:
    """See `views.inference.payload.InferencePayload` (no steps, no phases on a trace
    without serving step annotations). `capture`: the graph capture trace of a replay (the
    run `<run>/capture`), whose operators' shapes size the replayed steps' bytes."""
    steps = serving_steps(table)
    device = _device(table, steps)
    merged = merge_capture(table, capture) if capture is not None else None
    operators = None if merged is None else pd.Series(merged["captured_by"].to_numpy(),
                                                      index=merged["event"].to_numpy())
    frame = device_categories(table, operators).set_index("event")
    moved = step_bytes(table, steps, frame, merged, capture)
    replay = _replayed_steps(table, steps)
    sized = moved.to_dict("records")
    rows = [_row(s, sized[i], replay[i], device["memory_tbps"], capture is not None)
            for i, s in enumerate(steps.itertuples())]
    phases = [_phase(p, steps, rows, frame, device["memory_tbps"]) for p in PHASES]
    state = steps["state"].to_numpy()
    steady = np.flatnonzero(state == STEADY)
    notes = _notes(steps, rows)
    return {
        "steps": rows[:MAX_STEPS], "total_steps": len(rows), "max_steps": MAX_STEPS,
        "steady": {"steps": int(len(steady)),
                   "first_step": int(steady[0]) if len(steady) else None,
                   "last_step": int(steady[-1]) if len(steady) else None,
                   "warmup": int((state == WARMUP).sum()),
                   "capture": int((state == CAPTURE).sum()),
                   "idle": int((state == SKIPPED_IDLE).sum()),
                   "warmup_factor": WARMUP_FACTOR},
        "phases": [p for p in phases if p is not None],
        "device": device, "formulas": dict(FORMULAS), "notes": notes,
    }


def _int(value: float) -> Optional[int]:
    return int(value) if np.isfinite(value) else None


def _kv(s: Any) -> Optional[int]:
    known = [v for v in (s.context_kv_tokens, s.generation_kv_tokens) if np.isfinite(v)]
    return int(sum(known)) if known else None


def _row(s: Any, moved: dict[str, Any], replay: bool, peak: Optional[float], with_capture: bool
         ) -> dict[str, Any]:
    tokens = _int(s.tokens)
    nbytes = float(moved["bytes"]) if np.isfinite(moved["bytes"]) and s.gpu_us > 0 else None
    tbps = nbytes / s.gpu_us * 1e-6 if nbytes is not None else None
    return {
        "step": int(s.step), "name": str(s.name), "phase": s.phase, "state": s.state,
        "source": s.source, "mode": s.mode, "requests": _int(s.requests),
        "context_requests": _int(s.context_requests),
        "generation_requests": _int(s.generation_requests), "tokens": tokens,
        "kv_tokens": _kv(s), "start_us": float(s.start), "host_us": float(s.host_us),
        "device_events": int(s.device_events), "gpu_us": float(s.gpu_us),
        "span_us": float(s.span_us) if np.isfinite(s.span_us) else None,
        "time_us": float(s.time_us),
        "us_per_token": float(s.time_us) / tokens if tokens else None,
        "bytes": nbytes, "bandwidth_tbps": tbps,
        "bandwidth_pct": 100.0 * tbps / peak if tbps is not None and peak else None,
        "bytes_reason": None if nbytes is not None else graph_note(
            moved["reason"] or "no device work", replay, with_capture),
    }


def _phase(phase: str, steps: pd.DataFrame, rows: list[dict[str, Any]], frame: pd.DataFrame,
           peak: Optional[float]) -> Optional[dict[str, Any]]:
    mine = [r for r in rows if r["state"] == STEADY and r["phase"] == phase]
    if not mine:
        return None
    picked = steps[(steps["state"] == STEADY) & (steps["phase"] == phase)]
    time = float(sum(r["time_us"] for r in mine))
    counted = [r for r in mine if r["tokens"]]
    tokens = int(sum(r["tokens"] for r in counted))
    token_time = float(sum(r["time_us"] for r in counted))
    requests = [r["requests"] for r in mine if r["requests"] is not None]
    measured = [r for r in mine if r["bytes"] is not None]
    nbytes = float(sum(r["bytes"] for r in measured))
    busy = float(sum(r["gpu_us"] for r in measured))
    tbps = nbytes / busy * 1e-6 if measured and busy > 0 else None
    return {
        "phase": phase, "steps": len(mine),
        "mean_requests": float(np.mean(requests)) if requests else None,
        "tokens": tokens, "time_us": time, "mean_step_us": time / len(mine),
        "us_per_token": token_time / tokens if tokens else None,
        "tokens_per_s": tokens / token_time * 1e6 if tokens and token_time > 0 else None,
        "inter_token_latency_us": time / len(mine) if phase == DECODE else None,
        "categories": _categories(picked, frame),
        "bandwidth_steps": len(measured),
        "mean_bytes": nbytes / len(measured) if measured else None,
        "bandwidth_tbps": tbps,
        "bandwidth_pct": 100.0 * tbps / peak if tbps is not None and peak else None,
    }


def _categories(picked: pd.DataFrame, frame: pd.DataFrame) -> list[dict[str, Any]]:
    events = [e for evs in picked["events"] for e in evs]
    sel = frame.reindex(events)
    time = sel.groupby("category")["dur_us"].sum()
    total = float(time.sum())
    return [{"category": c, "time_us": float(time.get(c, 0.0)),
             "pct": 100.0 * float(time.get(c, 0.0)) / total if total > 0 else 0.0}
            for c in CATEGORIES]


def _device(table: TraceTable, steps: pd.DataFrame) -> dict[str, Any]:
    work = device_work(table).set_index("event")
    events = [e for evs in steps["events"] for e in evs]
    if not events:
        return {"device": None, "name": None, "peaks_model": None, "memory_tbps": None}
    gpu = int(work.loc[events, "device"].mode().iloc[0])
    info = device_info(table, gpu)
    return {"device": gpu, "name": info["name"] or None, "peaks_model": info["peaks_model"],
            "memory_tbps": info["memory_tbps"]}


def _replayed_steps(table: TraceTable, steps: pd.DataFrame) -> list[bool]:
    work = device_work(table)
    replayed = set(work["event"].to_numpy()[replayed_mask(table)].tolist())
    return [any(e in replayed for e in evs) for evs in steps["events"]]


def _notes(steps: pd.DataFrame, rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    if len(rows) > MAX_STEPS:
        notes.append(f"{len(rows)} steps: the table lists the first {MAX_STEPS}; the phase "
                     "summaries count all of them.")
    state = steps["state"]
    if (state == WARMUP).any():
        notes.append(f"{int((state == WARMUP).sum())} leading step(s) over {WARMUP_FACTOR:g}x "
                     "their phase's median time are left out as warm-up.")
    if (state == CAPTURE).any():
        notes.append(f"{int((state == CAPTURE).sum())} step(s) recorded a CUDA/HIP graph "
                     "(stream capture: nothing ran) and are left out.")
    decode = [r for r in rows if r["phase"] == DECODE and r["state"] == STEADY]
    if decode and all(r["bytes"] is None for r in decode):
        notes.append("Decode memory bandwidth is not estimable here: "
                      + str(decode[0]["bytes_reason"]) + ".")
    return notes
