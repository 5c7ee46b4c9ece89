"""The Overview view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.advice.straggler import AdviceSummary, advice_summary, run_advice
from ...analysis.distributed.summary import wants_summary
from ...analysis.overview import build_overview
from ...output.rows import Rows
from ..options import NoOptions
from ..spec import SPAN, ViewSpec
from .payload import OverviewPayload, RunAdvicePayload


def overview(table: Any, _options: NoOptions) -> Any:
    return build_overview(table)


def overview_run(inputs: dict[str, Any], skipped: dict[str, str], _options: NoOptions) -> Any:
    """`inputs`: each worker's `advice_summary` (the server, the CLI) or table (`build_view`)."""
    summaries = {w: v if isinstance(v, dict) else advice_summary(v) for w, v in inputs.items()}
    return {**run_advice(summaries), "skipped": dict(skipped)}


def overview_rows(payload: dict[str, Any]) -> Rows:
    return [{"step": s["name"], "total_us": s["total_us"], **s["breakdown_us"]}
            for s in payload.get("steps") or []]


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("overview", "/overview", "Overview", overview,
             payload=OverviewPayload, rows=overview_rows,
             summary="Overview of a worker span (steps, step-time breakdown, GPUs, "
                     "recommendations).",
             description="Shape: see `tb_plugin.analysis.overview.build_overview`. With "
                         "`format=csv`, the per-step breakdown table."),
    ViewSpec("overview_run", "/overview/run", "Overview", overview_run, kind=SPAN,
             payload=RunAdvicePayload, summarize=advice_summary, summary_wanted=wants_summary,
             summary_type=AdviceSummary,
             summary="Run-level advice of one span over all workers (the straggler), shown "
                     "first in each worker's Overview.",
             description="Built from one small summary per worker (its distributed summary "
             "and mean step breakdown).\nShape: see "
             "`tb_plugin.analysis.advice.straggler.run_advice`, plus `skipped: {worker: "
             "reason}`.",
             errors={"404": "Unknown run or span."}),
)
