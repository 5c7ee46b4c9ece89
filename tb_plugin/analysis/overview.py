"""The Overview view: step-time breakdown, GPU summary, environment and recommendations.

`build_overview(table)` returns plain JSON-ready data (Python floats, no HTML); the frontend
formats it. See the contract in the docstring of `build_overview`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..ingest.schema import DEVICE_KINDS, Kind, TraceTable
from ..views.overview.payload import OverviewPayload
from .advice.diagnosis import add_diagnosis
from .advice.recommendations import Facts, recommend
from .breakdown import CATEGORIES, Breakdown, compute_breakdown
from .efficiency.hardware import compute_capability, device_vendor
from .efficiency.roofline import device_info, mbu_pct, mfu_pct
from .efficiency.tensor_cores import event_tc_flags
from .events import HOST_KINDS, kernel_device_ids, kind_mask, name_mask
from .gpu_metrics import GpuMetrics, event_devices, gpu_metrics
from .graphs import graph_summary
from .launch import device_properties
from .memo import memoised
from .optree import build_op_tree
from .variance.steps import step_variance


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
     "notes": [human-readable caveats: fallback step, trimmed steps...],
     "variance": {"steps", "mean_us", "median_us", "std_us", "cv_pct", "z_threshold",
                  "outliers": [see analysis/variance/steps.py]}}
    ```
    `breakdown_us` always holds all eight categories; a step's categories sum to its total.
    """
    return memoised(table, "overview", lambda: _build_overview(table))


def _build_overview(table: TraceTable) -> dict[str, Any]:
    breakdown = compute_breakdown(table)
    metrics = gpu_metrics(table)
    tc = tensor_core_summary(table)
    average = breakdown.average
    graphs = graph_summary(table)
    capture = graphs["mode"] == "capture"
    return {
        "steps": _steps_json(breakdown),
        "average": {
            "total_us": average["Total"],
            "breakdown_us": {c: average[c] for c in CATEGORIES},
        },
        "categories": breakdown.shown_categories(),
        "gpus": [_gpu_json(table, m, tc, capture) for m in metrics.values()],
        "recommendations": recommend(collect_facts(table, breakdown, metrics, tc)),
        "environment": _environment(table, breakdown, metrics),
        "notes": _notes(breakdown) + graphs["notes"],
        "variance": step_variance(table),
    }


def tensor_core_summary(table: TraceTable,
                        window: Optional[tuple[float, float]] = None) -> dict[str, Any]:
    """Tensor-core ratios for the overview and the kernel view.

    - kernel_tc_ratio: TC kernels' time / all kernels' time (every kernel event, as the kernel
      view's pie).
    - tc_eligible_ops_kernel_ratio: own-kernel time of the bottom-most TC-eligible nodes / own
      kernel time of all operators (spec 3.9; launches out of any op are not counted).
    - tc_ratio_by_device: per GPU id, TC kernel time / kernel time, each kernel clipped to
      `window` (the steps span) when given; empty when the trace has no kernels.
    """
    rows = np.flatnonzero(table.events["kind"].to_numpy() == Kind.KERNEL)
    start = table.events["ts"].to_numpy()[rows]
    end = start + np.nan_to_num(table.events["dur"].to_numpy()[rows])
    tc = event_tc_flags(table)[rows]
    dur = end - start
    total = float(dur.sum())
    return {
        "kernel_tc_ratio": float(dur[tc].sum()) / total if total > 0 else 0.0,
        # Operators' own kernel time counts kernels only: none, and the ratio is 0 by its
        # definition (the operator tree, 0.2 s for a 200 MB CPU trace, is not built for it).
        "tc_eligible_ops_kernel_ratio": (build_op_tree(table).tc_eligible_ops_kernel_ratio()
                                         if len(rows) else 0.0),
        "tc_ratio_by_device": _ratio_by_device(table, rows, start, end, tc, window),
    }


def _ratio_by_device(table: TraceTable, rows: np.ndarray, start: np.ndarray, end: np.ndarray,
                     tc: np.ndarray, window: Optional[tuple[float, float]]) -> dict[int, float]:
    if len(rows) == 0:
        return {}
    if window is not None:
        start, end = np.maximum(start, window[0]), np.minimum(end, window[1])
    dur = np.maximum(end - start, 0.0)
    device = kernel_device_ids(table, rows)
    known = np.isfinite(device)
    ids, inverse = np.unique(device[known].astype(np.int64), return_inverse=True)
    total = np.bincount(inverse, weights=dur[known], minlength=len(ids))
    tc_time = np.bincount(inverse, weights=np.where(tc[known], dur[known], 0.0),
                          minlength=len(ids))
    return {int(d): float(t / a) if a > 0 else 0.0 for d, t, a in zip(ids, tc_time, total)}


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


def _gpu_json(table: TraceTable, m: GpuMetrics, tc: dict[str, Any], capture: bool = False
              ) -> dict[str, Any]:
    """One GPU's card; on a graph capture trace (`graphs.graph_summary`) the kernels never ran,
    so utilization, SM efficiency, occupancy and MFU are null (the notes say why)."""
    props = device_properties(table, m.device)
    memory = props.get("totalGlobalMem")
    info = device_info(table, m.device)
    tc_by_device = tc["tc_ratio_by_device"]
    tc_ratio = tc_by_device.get(m.device, tc_by_device.get(str(m.device)))
    return {
        "id": m.device,
        "name": props.get("name"),
        "memory_gb": round(memory / 1024**3, 2) if isinstance(memory, (int, float)) else None,
        "compute_capability": compute_capability(props, device_vendor(
            props, table.metadata.extra)),
        "vendor": info["vendor"],
        "architecture": info["architecture"],
        "peaks_model": info["peaks_model"],
        "mfu_pct": mfu_pct(table) if info["peaks_model"] and not capture else None,
        "peaks_reason": info["peaks_reason"],
        "mbu_pct": mbu_pct(table) if info["peaks_model"] and not capture else None,
        "matrix_units": info["matrix_units"],
        "utilization_pct": None if capture else _pct(m.utilization),
        "sm_efficiency_pct": None if capture else _pct(m.sm_efficiency),
        "achieved_occupancy_pct": None if capture else _pct(m.achieved_occupancy, 1.0),
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
                  tc: dict[str, Any]) -> Facts:
    events = table.events
    host = kind_mask(events, HOST_KINDS)
    backend = (table.metadata.distributed_info or {}).get("backend")
    nccl_names = name_mask(events, lambda n: n.str.startswith("nccl:") | n.str.match(
        r"nccl\w*Kernel"))
    props = {int(p.get("id", i)): p for i, p in enumerate(table.metadata.device_properties)
             if isinstance(p.get("id", i), int)}
    facts = Facts(
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
        kernel_tc_ratio=tc["kernel_tc_ratio"],
        tc_eligible_ops_kernel_ratio=tc["tc_eligible_ops_kernel_ratio"],
    )
    return add_diagnosis(facts, table, breakdown)


def _gpu_memory_peaks(table: TraceTable) -> dict[int, float]:
    """Peak `Total Allocated` per CUDA device; CPU (type 0) and other types are not GPUs."""
    memory = table.memory
    if len(memory) == 0:
        return {}
    gpu = (memory["device_type"] == 1) & memory["device_id"].notna() & \
        memory["total_allocated"].notna()
    peaks = memory[gpu].groupby("device_id")["total_allocated"].max()
    return {int(d): float(v) for d, v in peaks.items()}

