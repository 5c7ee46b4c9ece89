"""The Overview view: step-time breakdown, GPU summary, environment and recommendations.

`build_overview(table)` returns plain JSON-ready data (Python floats, no HTML); the frontend
formats it. See the contract in the docstring of `build_overview`.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from ..ingest.schema import DEVICE_KINDS, TraceTable
from ..payloads import OverviewPayload
from .breakdown import CATEGORIES, HOST_KINDS, Breakdown, compute_breakdown
from .gpu_metrics import GpuMetrics, event_devices, gpu_metrics
from .launch import device_properties
from .recommendations import Facts, recommend
from .steps import kind_mask, name_mask

log = logging.getLogger(__name__)


def build_overview(table: TraceTable) -> OverviewPayload:
    """Overview of one trace, computed once per table.

    ```
    {"steps": [{"name", "total_us", "breakdown_us": {category: us}}],
     "average": {"total_us", "breakdown_us"},
     "categories": [categories to show, priority order],
     "gpus": [{"id", "name", "memory_gb", "compute_capability", "utilization_pct",
               "sm_efficiency_pct", "achieved_occupancy_pct", "tensor_core_pct"}],
     "recommendations": [see recommendations.py],
     "environment": {"device_type": "GPU"|"CPU", "gpu_count", "framework", "distributed"},
     "notes": [human-readable caveats: fallback step, trimmed steps...]}
    ```
    `breakdown_us` always holds all eight categories; a step's categories sum to its total.
    """
    return table.memo("overview", lambda: _build_overview(table))


def _build_overview(table: TraceTable) -> dict[str, Any]:
    breakdown = compute_breakdown(table)
    metrics = gpu_metrics(table)
    tc = tensor_core_info(table)
    average = breakdown.average
    return {
        "steps": _steps_json(breakdown),
        "average": {
            "total_us": average["Total"],
            "breakdown_us": {c: average[c] for c in CATEGORIES},
        },
        "categories": breakdown.shown_categories(),
        "gpus": [_gpu_json(table, m, tc) for m in metrics.values()],
        "recommendations": recommend(collect_facts(table, breakdown, metrics, tc)),
        "environment": _environment(table, breakdown, metrics),
        "notes": _notes(breakdown),
    }


def tensor_core_info(table: TraceTable) -> Optional[dict[str, Any]]:
    """The tensor-core summary of the operators module, or None while it is unavailable."""
    try:
        from .tensor_cores import tensor_core_summary
    except ImportError:
        return None
    try:
        return tensor_core_summary(table)
    except Exception:  # one failing metric must not cost the whole overview
        log.exception("tensor-core summary failed; the overview shows it as unavailable")
        return None


def _steps_json(breakdown: Breakdown) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "total_us": float(breakdown.totals[i]),
            "breakdown_us": {c: float(breakdown.costs[c][i]) for c in CATEGORIES},
        }
        for i, name in enumerate(breakdown.steps.names)  # one entry per step
    ]


def _pct(value: Optional[float], scale: float = 100.0) -> Optional[float]:
    return None if value is None else float(value) * scale


def _gpu_json(table: TraceTable, m: GpuMetrics, tc: Optional[dict[str, Any]]) -> dict[str, Any]:
    props = device_properties(table, m.device)
    memory = props.get("totalGlobalMem")
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    tc_by_device = (tc or {}).get("tc_ratio_by_device") or {}
    tc_ratio = tc_by_device.get(m.device, tc_by_device.get(str(m.device)))
    return {
        "id": m.device,
        "name": props.get("name"),
        "memory_gb": round(memory / 1024**3, 2) if isinstance(memory, (int, float)) else None,
        "compute_capability": f"{major}.{minor}" if major is not None and minor is not None
        else None,
        "utilization_pct": _pct(m.utilization),
        "sm_efficiency_pct": _pct(m.sm_efficiency),
        "achieved_occupancy_pct": _pct(m.achieved_occupancy, 1.0),  # already a percentage
        "tensor_core_pct": _pct(tc_ratio),
    }


def _environment(table: TraceTable, breakdown: Breakdown, metrics: dict[int, GpuMetrics]
                 ) -> dict[str, Any]:
    info = table.metadata.distributed_info or {}
    distributed = {k: info[k] for k in ("backend", "rank", "world_size") if k in info}
    return {
        "device_type": "GPU" if breakdown.has_gpu else "CPU",
        "gpu_count": len(metrics),
        "framework": table.metadata.framework,
        "distributed": distributed or None,
    }


def _notes(breakdown: Breakdown) -> list[str]:
    steps = breakdown.steps
    notes = list(steps.warnings)
    if not steps.from_markers and len(steps):
        notes.append("No ProfilerStep#N markers: the whole trace is shown as one step \"0\".")
    if len(steps) == 0:
        notes.append("The trace has no events to analyse.")
    return notes


def used_devices(table: TraceTable) -> list[int]:
    """GPUs that ran kernels, copies or memsets (`device` arg, else numeric pid)."""
    device = event_devices(table, np.flatnonzero(kind_mask(table.events, DEVICE_KINDS)))
    return sorted(int(d) for d in np.unique(device[np.isfinite(device)]))


def collect_facts(table: TraceTable, breakdown: Breakdown, metrics: dict[int, GpuMetrics],
                  tc: Optional[dict[str, Any]]) -> Facts:
    events = table.events
    host = kind_mask(events, HOST_KINDS)
    backend = (table.metadata.distributed_info or {}).get("backend")
    nccl_names = name_mask(events, lambda n: n.str.startswith("nccl:") | n.str.match(
        r"nccl\w*Kernel"))
    props = {int(p.get("id", i)): p for i, p in enumerate(table.metadata.device_properties)
             if isinstance(p.get("id", i), int)}
    return Facts(
        average=breakdown.average,
        gpu_utilization={d: m.utilization for d, m in metrics.items()},
        used_devices=used_devices(table),
        device_props=props,
        uses_dp=bool((host & name_mask(events, lambda n: n == "DataParallel.forward")).any()),
        uses_ddp=bool((host & name_mask(
            events, lambda n: n == "DistributedDataParallel.forward")).any()),
        uses_nccl=backend == "nccl" or bool(nccl_names.any()),
        backend=backend if isinstance(backend, str) else None,
        memory_peaks=_gpu_memory_peaks(table),
        kernel_tc_ratio=(tc or {}).get("kernel_tc_ratio"),
        tc_eligible_ops_kernel_ratio=(tc or {}).get("tc_eligible_ops_kernel_ratio"),
    )


def _gpu_memory_peaks(table: TraceTable) -> dict[int, float]:
    """Peak `Total Allocated` per CUDA device; CPU (type 0) and other types are not GPUs."""
    memory = table.memory
    if len(memory) == 0:
        return {}
    gpu = (memory["device_type"] == 1) & memory["device_id"].notna() & \
        memory["total_allocated"].notna()
    peaks = memory[gpu].groupby("device_id")["total_allocated"].max()
    return {int(d): float(v) for d, v in peaks.items()}

