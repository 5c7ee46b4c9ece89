"""The findings of one trace (`/findings`, `report --view findings`): what matters, small
enough for a script or an agent to read whole.

Everything is read off what the views compute (the Overview's steps, GPU summary and
recommendations, the Operator table, the graph summary and the per-file features), so the
findings cannot disagree with the UI; this module only selects, rounds and points:

- `health`: one check per thing a view needs from the trace (parse state, device work,
  ProfilerStep markers, graph mode, input shapes, call stacks, memory events, module events,
  flows), `ok` false when the trace lacks it, with the views that then show less (none listed
  when `ok`);
- `steps`: count, mean/min/max (1 decimal), the slowest step, and the mean breakdown as shares
  of the mean step (categories over 0 only);
- `recommendations`: the Overview's first `top`, each with an evidence pointer (a Trace time
  range when the rule names one, else the view that proves it);
- `pointers`: the data views that hold the detail (only those the trace supports).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..ingest.schema import TraceTable
from ..views.findings.payload import FINDINGS_SCHEMA_VERSION, FindingsPayload
from .breakdown import CATEGORIES
from .features import features
from .graphs import graph_summary
from .inference.annotations import serving_annotation_mask
from .operators import operator_table
from .overview import build_overview
from .steps import compute_steps

#: The tab a recommendation names (`Recommendation.view`) -> the data view that shows it.
TAB_VIEWS = {"Overview": "overview", "Operator": "operators", "Kernel": "kernels",
             "Trace": "timeline_range", "Memory": "memory", "Module": "modules",
             "Distributed": "distributed", "GPU Idle": "gpu_idle", "Diff": "diff",
             "Inference": "inference"}
TOP_OPERATORS = 5
_MAX_TEXT = 300  # characters of a recommendation's text and of a parse message kept
_GPU_KEYS = ("utilization_pct", "sm_efficiency_pct", "achieved_occupancy_pct",
             "tensor_core_pct", "mfu_pct")


def build_findings(table: TraceTable, top: int) -> FindingsPayload:
    overview = build_overview(table)
    counts = features(table)
    gpu = counts["kernels"] + counts["memcpy"] + counts["memset"] > 0
    steps = _steps(overview)
    recommendations = overview["recommendations"]
    info = table.metadata.distributed_info or {}
    return {
        "schema_version": FINDINGS_SCHEMA_VERSION,
        "trace": {
            "state": table.status.state,  # type: ignore[typeddict-item]
            "events": int(table.event_count),
            "device": "GPU" if gpu else "CPU",
            "gpus": [g["name"] or str(g["id"]) for g in overview["gpus"]],
            "rank": _int_or_none(info.get("rank")),
            "world_size": _int_or_none(info.get("world_size")),
        },
        "health": health(table, counts, steps),
        "steps": steps,
        "gpus": [{k: _round(g.get(k)) for k in _GPU_KEYS} for g in overview["gpus"]],
        "recommendations": [_recommendation(r) for r in recommendations[:top]],
        "recommendations_total": len(recommendations),
        "top_operators": _top_operators(table, gpu),
        "pointers": _pointers(table, counts, gpu),
        "notes": list(overview["notes"]),
    }


def health(table: TraceTable, counts: dict[str, Any], steps: dict[str, Any]
           ) -> list[dict[str, Any]]:
    """One check per thing a view needs from the trace (module docstring)."""
    status = table.status
    gpu = counts["kernels"] + counts["memcpy"] + counts["memset"]
    mode = graph_summary(table)["mode"]
    shapes = _present(table.op_args, "input_dims")
    stacks = _present(table.op_args, "call_stack")
    parse = _cut(status.state + (f": {'; '.join(status.messages)}" if status.messages else ""))
    graphs = {"none": "no CUDA/HIP graphs",
              "replay": "graph replay: kernels attributed to the operators that captured them "
                        "where the capture trace is paired",
              "capture": "a graph capture trace: its kernels were recorded in stream capture, "
                         "not run, so utilization and MFU do not apply"}[mode]
    return [
        _check("parse", status.state == "ok", parse, ["*"]),
        _check("gpu", gpu > 0, f"{counts['kernels']} kernels, {counts['memcpy']} memcpy, "
               f"{counts['memset']} memset", ["kernels", "kernel_pies", "roofline",
                                              "gpu_idle", "whatif"]),
        _check("steps", steps["from_markers"] and steps["count"] > 0,
               f"{steps['count']} steps" + ("" if steps["from_markers"] else
                                            " (no ProfilerStep#N markers: one step \"0\")"),
               ["overview", "gpu_idle", "whatif", "diff"]),
        _check("graphs", mode != "capture", graphs, ["overview", "roofline", "gpu_idle"]),
        _check("shapes", shapes > 0, f"{shapes} operator calls with input shapes "
               "(record_shapes=True)", ["operators", "roofline", "compiled"]),
        _check("call_stacks", stacks > 0, f"{stacks} operator calls with a call stack "
               "(with_stack=True)", ["operator_stack"]),
        _check("memory", counts["memory_events"] > 0, f"{counts['memory_events']} memory "
               "events (profile_memory=True)", ["memory"]),
        _check("modules", counts["module_events"] > 0, f"{counts['module_events']} module "
               "events (with_modules=True)", ["modules"]),
        _check("flows", counts["flows"] > 0, f"{counts['flows']} flow events",
               ["timeline_event"]),
    ]


def _check(name: str, ok: bool, detail: str, affects: list[str]) -> dict[str, Any]:
    return {"id": name, "ok": bool(ok), "detail": detail, "affects": [] if ok else affects}


def _present(frame: Any, column: str) -> int:
    """Rows of `frame` whose `column` holds a value (0 when the column is absent)."""
    if column not in frame:
        return 0
    return int(frame[column].notna().sum())


def _steps(overview: dict[str, Any]) -> dict[str, Any]:
    steps = overview["steps"]
    totals = np.array([float(s["total_us"]) for s in steps])  # float64, also when empty
    mean = overview["average"]["total_us"]
    breakdown = overview["average"]["breakdown_us"]
    from_markers = not any(n.startswith("No ProfilerStep#N markers") for n in overview["notes"])
    slowest = steps[int(np.argmax(totals))]["name"] if len(steps) else None
    return {
        "count": len(steps),
        "from_markers": from_markers,
        "mean_us": round(float(mean), 1),
        "min_us": round(float(totals.min()), 1) if len(steps) else None,
        "max_us": round(float(totals.max()), 1) if len(steps) else None,
        "slowest": slowest,
        "breakdown_pct": {c: round(100.0 * breakdown[c] / mean, 1) for c in CATEGORIES
                          if mean > 0 and breakdown[c] > 0},
    }


def _recommendation(r: dict[str, Any]) -> dict[str, Any]:
    if r["start_us"] is not None and r["end_us"] is not None:
        evidence = {"view": "timeline_range", "options": {
            "start_us": r["start_us"], "end_us": r["end_us"]},
            "why": "the events in the range that proves it"}
    else:
        evidence = {"view": TAB_VIEWS.get(r["view"], "overview"), "options": {},
                    "why": f"the {r['view']} view proves it"}
    return {"id": r["id"], "severity": r["severity"], "title": r["title"],
            "text": _cut(r["text"]), "metric": r["metric"], "unit": r["unit"],
            "saving_us": r["saving_us"], "saving_pct": r["saving_pct"],
            "evidence": evidence, "whatif": r["whatif"]}


def _top_operators(table: TraceTable, gpu: bool) -> list[dict[str, Any]]:
    ops = operator_table(table)  # grouped by operator name (its default)
    column = "device_self_us" if gpu else "host_self_us"
    total = float(ops[column].sum())  # 0.0, and no rows below, for an empty table
    top = ops.nlargest(TOP_OPERATORS, column)
    return [{"name": str(row["name"]), "self_us": round(float(row[column]), 1),
             "self_pct": round(100.0 * float(row[column]) / total, 1) if total > 0 else None}
            for _, row in top.iterrows() if row[column] > 0]


def _pointers(table: TraceTable, counts: dict[str, Any], gpu: bool) -> list[dict[str, Any]]:
    out = [_pointer("overview", {}, "steps, breakdown, GPU summary, all recommendations"),
           _pointer("operators", {"group_by": "operator"}, "every operator's host and device "
                    "time")]
    if gpu:
        out += [_pointer("kernels", {"group_by": "kernel"}, "every kernel's time and "
                         "occupancy"),
                _pointer("gpu_idle", {}, "why the GPU waits: idle time per step and queue"),
                _pointer("roofline", {}, "FLOPs, achieved TFLOP/s, MFU per step")]
    if counts["memory_events"]:
        out.append(_pointer("memory", {}, "allocations, peaks, per-operator memory"))
    if counts["module_events"]:
        out.append(_pointer("modules", {}, "time per nn.Module"))
    if serving_annotation_mask(table).any():
        out.append(_pointer("inference", {}, "serving steps: phase, tokens, time per token, "
                            "HBM bandwidth"))
    if counts["distributed"] or counts["comm_ops"]:
        out.append(_pointer("distributed", {}, "every worker of the span: overlap, "
                            "stragglers, collectives"))
    steps = compute_steps(table)
    if len(steps):
        i = int(np.argmax(steps.lengths))
        out.append(_pointer("timeline_range", {
            "start_us": float(steps.starts[i]), "end_us": float(steps.ends[i])},
            f"the events of the slowest step ({steps.names[i]}) by name"))
    if gpu:
        out.append(_pointer("whatif", {"edit": "launch=0"}, "the predicted step time without "
                            "launch overhead (any edit: README, What if)"))
    return out


def _cut(text: str) -> str:
    """At most `_MAX_TEXT` characters; a cut text ends with "..."."""
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 3] + "..."


def _pointer(view: str, options: dict[str, Any], why: str) -> dict[str, Any]:
    return {"view": view, "options": options, "why": why}


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(float(value), 1)


def _int_or_none(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
