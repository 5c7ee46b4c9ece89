"""The Overview view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.overview import build_overview
from ...output.rows import Rows
from ..options import NoOptions
from ..spec import ViewSpec
from .payload import OverviewPayload


def overview(table: Any, _options: NoOptions) -> Any:
    return build_overview(table)


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
)
