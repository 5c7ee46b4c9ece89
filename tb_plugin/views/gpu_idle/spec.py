"""The GPU Idle view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.distributed.summary import RankSummary, summary_builtins, wants_summary
from ...analysis.gpu_idle.view import build_gpu_idle
from ...analysis.whatif import EditError, StepNotFound, build_whatif, parse_edits
from ...analysis.whatif.edits import RUN_TARGETS
from ...analysis.whatif.ranks import build_whatif_run
from ...output.rows import Rows
from ..errors import NotInTrace, OptionError
from ..spec import SPAN, ViewSpec
from .options import GpuIdleOptions, WhatIfOptions, WhatIfRunOptions
from .payload import GpuIdlePayload
from .whatif_payload import WhatIfPayload, WhatIfRunPayload


def gpu_idle(table: Any, options: GpuIdleOptions) -> Any:
    return build_gpu_idle(table, options.kernel_wait_us, options.runtime_cutoff_us,
                          options.delay_cutoff_us, options.queue_full, options.step)

def whatif(table: Any, options: WhatIfOptions) -> Any:
    try:
        edits = parse_edits(options.edit)
    except EditError as exc:
        raise OptionError(str(exc)) from exc
    try:
        return build_whatif(table, edits, options.step)
    except StepNotFound as exc:
        raise NotInTrace(str(exc)) from exc


def whatif_run(inputs: dict[str, Any], skipped: dict[str, str], options: WhatIfRunOptions
               ) -> Any:
    """`inputs`: each worker's distributed summary (the server, the CLI) or table."""
    try:
        return {**build_whatif_run(inputs, parse_edits(options.edit, RUN_TARGETS)),
                "skipped": dict(skipped)}
    except EditError as exc:
        raise OptionError(str(exc)) from exc


def gpu_idle_rows(payload: dict[str, Any]) -> Rows:
    """The GPU Idle view's tables, one row per entry, with a `table` column."""
    out: Rows = [{"table": "temporal", **d} for d in payload.get("temporal") or []]
    out += [{"table": "idle", **s} for s in (payload.get("idle") or {}).get("streams") or []]
    out += [{"table": "queue", **{k: v for k, v in q.items() if k != "series"}}
            for q in (payload.get("queue") or {}).get("streams") or []]
    launch = payload.get("launch") or {}
    out.append({"table": "launch", **{k: v for k, v in launch.items()
                                      if not isinstance(v, (list, dict))}})
    out += [{"table": "sequences", **s, "kernels": " > ".join(s["kernels"])}
            for s in payload.get("sequences") or []]
    out += [{"table": "annotations", **a} for a in payload.get("annotations") or []]
    out += [{"table": "critical_path", **{k: v for k, v in c.items() if k != "shares_us"},
             **{f"{k}_us": v for k, v in c["shares_us"].items()}}
            for c in (payload.get("critical_path") or {}).get("steps") or []]
    return out

def whatif_rows(payload: dict[str, Any]) -> Rows:
    """One row per replayed step."""
    return list(payload.get("steps") or [])


def whatif_run_rows(payload: dict[str, Any]) -> Rows:
    """One row per rank."""
    return list(payload.get("ranks") or [])


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("gpu_idle", "/gpu_idle", "GPU Idle", gpu_idle,
             payload=GpuIdlePayload, options=GpuIdleOptions, rows=gpu_idle_rows,
             summary="Why the GPU is idle: temporal and idle-time breakdowns, launch "
                     "statistics, queue lengths, bandwidth, kernel sequences, annotations, "
                     "critical path, recommendations.",
             description="Shape: see `tb_plugin.views.gpu_idle.payload.GpuIdlePayload`; each "
             "analysis states its formula in\n`formulas`. A trace without device work answers "
             "`applicable: false` with a message. With\n`format=csv`, one row per table entry "
             "with a `table` column (`temporal`, `idle`, `queue`,\n`launch`, `sequences`, "
             "`annotations`, `critical_path`)."),
    ViewSpec("whatif", "/whatif", "GPU Idle", whatif,
             payload=WhatIfPayload, options=WhatIfOptions, rows=whatif_rows,
             summary="What if: the predicted step time when operators, kernels, data "
                     "loading, communication, launches or synchronisation take a different "
                     "time (a replay of each step's dependency model).",
             description="Shape: see `tb_plugin.views.gpu_idle.whatif_payload.WhatIfPayload`. "
             "The model and the edit grammar: `tb_plugin.analysis.whatif`. With `format=csv`, "
             "one row per replayed step."),
    ViewSpec("whatif_run", "/whatif/run", "GPU Idle", whatif_run, kind=SPAN,
             payload=WhatIfRunPayload, options=WhatIfRunOptions, rows=whatif_run_rows,
             summarize=summary_builtins, summary_wanted=wants_summary,
             summary_type=RankSummary,
             summary="What if across the ranks of a span: the predicted step time of every "
                     "rank when one rank's lateness (the straggler) is removed or communication "
                     "is overlapped fully (a replay on the collective dependencies).",
             description="Built from one small summary per worker (its distributed summary). "
             "Shape: see\n`tb_plugin.views.gpu_idle.whatif_payload.WhatIfRunPayload`; the "
             "model and the edits:\n`tb_plugin.analysis.whatif.ranks`. With `format=csv`, one "
             "row per rank.",
             errors={"404": "Unknown run or span."}),
)
