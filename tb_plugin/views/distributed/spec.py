"""The Distributed view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.distributed.summary import RankSummary, summary_builtins, wants_summary
from ...analysis.distributed.view import build_distributed_view
from ...output.rows import Rows
from ..options import NoOptions
from ..spec import SPAN, ViewSpec
from .payload import DistributedPayload


def distributed(inputs: dict[str, Any], skipped: dict[str, str], _options: NoOptions) -> Any:
    return build_distributed_view(inputs, skipped)  # tables, or summaries (`summary_builtins`)


def distributed_rows(payload: dict[str, Any]) -> Rows:
    return [{"worker": worker, **row} for worker, table in sorted(payload["comm_ops"].items())
            for row in table["rows"]]


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("distributed", "/distributed", "Distributed", distributed,
             payload=DistributedPayload, kind=SPAN,
             summarize=summary_builtins, summary_wanted=wants_summary,
             summary_type=RankSummary,
             rows=distributed_rows,
             summary="Distributed view of one span over all workers of the run.",
             description="Span ids are per-worker indices (`1`, `2`, ...): workers are matched "
             "by the same id.\nWorkers whose file of that span is broken, or that have no such "
             "span, are left out and\nnamed in `skipped` and `messages`; 202 while any "
             "worker's file of that span is still\nloading. Shape: see "
             "`tb_plugin.analysis.distributed.run.build_distributed`, plus `skipped:\n{worker: "
             "reason}`, built from one small summary per worker. With `format=csv`, the\n"
             "communication-op rows with a `worker` column.",
             errors={"404": "Unknown run or span, or the run has no Distributed view."}),
)
