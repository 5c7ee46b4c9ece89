"""The Inference view's spec, builder and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.inference.view import build_inference
from ...output.rows import Rows
from ..errors import NotInTrace
from ..options import NoOptions
from ..spec import ViewSpec
from .payload import InferencePayload

NOT_SERVING = ("no serving step annotation in this worker span: the Inference view reads "
               "vLLM's execute_<n>_context_<c>(..)_generation_<g>(..) and SGLang's "
               "step[<MODE> bs=..] annotations")


def inference(table: Any, _options: NoOptions) -> Any:
    payload = build_inference(table)
    if payload["total_steps"] == 0:
        raise NotInTrace(NOT_SERVING)
    return payload


def step_rows(payload: dict[str, Any]) -> Rows:
    """One row per step (the steps table)."""
    return list(payload.get("steps") or [])


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("inference", "/inference", "Inference", inference,
             payload=InferencePayload, rows=step_rows,
             summary="Inference view: serving steps (vLLM, SGLang) with phase, batch and "
                     "token counts, the steady-state window, per-phase time by op category, "
                     "per-token latency and memory-bandwidth utilization; 404 when the "
                     "worker span has no serving step annotation.",
             description="Shape: see `tb_plugin.analysis.inference.view.build_inference`. "
                         "With `format=csv`, one row per step."),
)
