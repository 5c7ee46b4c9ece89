"""The GPU Idle view: why the GPU is idle, per worker span.

`build_gpu_idle(table, ...)` gathers every analysis of `idle.py`, `launch_stats.py` and
`critical_path.py` with its formula (the UI shows it) and the recommendations. A trace without
device work, and a graph capture trace (kernels recorded, never run: `graphs.py`), get
`applicable: false` and a message; its host-side annotations are still shown.
"""

from __future__ import annotations

from typing import Any, Optional

from ...ingest.schema import TraceTable
from ...views.gpu_idle.payload import GpuIdlePayload
from ..device_work import device_work
from ..graphs import CAPTURE_NOTE, graph_summary
from ..overview import build_overview
from ..vendor import trace_vendor
from . import critical_path, idle, launch_stats

DEFAULT_KERNEL_WAIT_US = 30.0
DEFAULT_RUNTIME_CUTOFF_US = 50.0
DEFAULT_DELAY_CUTOFF_US = 100.0
DEFAULT_QUEUE_FULL = 1024

NOT_APPLICABLE = ("No kernel, memcpy or memset in this trace (a CPU-only or host-only "
                  "recording): GPU idle time, launch statistics, queue lengths, bandwidth "
                  "and the critical path do not apply. Record with "
                  "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] to see them.")


def build_gpu_idle(table: TraceTable, kernel_wait_us: float = DEFAULT_KERNEL_WAIT_US,
                   runtime_cutoff_us: float = DEFAULT_RUNTIME_CUTOFF_US,
                   delay_cutoff_us: float = DEFAULT_DELAY_CUTOFF_US,
                   queue_full: int = DEFAULT_QUEUE_FULL,
                   step: Optional[str] = None) -> GpuIdlePayload:
    """See `views.gpu_idle.payload.GpuIdlePayload` for the shape; times in trace us."""
    graphs = graph_summary(table)
    capture = graphs["mode"] == "capture"
    applicable = len(device_work(table)) > 0 and not capture
    formulas = {**idle.FORMULAS, **launch_stats.FORMULAS,
                "critical_path": critical_path.FORMULA}
    payload: dict[str, Any] = {
        "applicable": applicable,
        "message": CAPTURE_NOTE if capture else (None if applicable else NOT_APPLICABLE),
        "graphs": graphs,
        "vendor": trace_vendor(table),
        "formulas": formulas,
        "temporal": idle.temporal_breakdown(table),
        "idle": idle.idle_breakdown(table, kernel_wait_us),
        "launch": launch_stats.launch_stats(table, runtime_cutoff_us, delay_cutoff_us),
        "queue": {"queue_full": queue_full, "streams": idle.queue_lengths(table, queue_full)},
        "bandwidth": idle.bandwidth(table),
        "sequences": launch_stats.kernel_sequences(table),
        "annotations": launch_stats.annotation_breakdown(table),
        "critical_path": critical_path.critical_paths(table, step) if applicable else {
            "formula": critical_path.FORMULA, "steps": [], "truncated": False, "step": None,
            "event_ids": []},
        "recommendations": build_overview(table)["recommendations"],
    }
    return payload  # type: ignore[return-value]
