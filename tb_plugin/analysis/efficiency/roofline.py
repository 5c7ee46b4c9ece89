"""Roofline and model FLOPs utilisation: FLOPs/bytes per operator against the device's peaks.

Only the outermost FLOP-carrying operators count (an `aten::conv2d` and the
`aten::convolution` -> `aten::mkldnn_convolution` it calls are one convolution), so totals never
double count. An operator's time is its device time (kernels it launched, children included)
on a GPU trace, its host time on a CPU-only trace.

- Each operator is scored in the precision its math ran (`analysis.efficiency.precision`: TF32 for
an
  fp32 GEMM on tensor cores, FP8/FP4 from MX kernel names...), per vendor.
- achieved TFLOP/s = FLOPs / time; achieved TB/s = bytes / time; arithmetic intensity =
  FLOPs / bytes; `bound` = "compute" when the intensity is at or above the device's ridge point
  (peak FLOP/s of the row's precision / peak bandwidth), else "memory"; null without known
  peaks. MBU of a row = achieved TB/s / peak bandwidth.
- Above the roof: a row whose achieved TFLOP/s exceeds its roof min(peak, intensity * bandwidth)
  by more than `ABOVE_ROOF` (5%) gets `above_roof`, the likely
  reason, first that applies: "algorithmic_flops" (a convolution that ran a Winograd/FFT
  kernel: fewer multiplies than the direct formula counts), "precision" (the chip has a faster
  precision whose peak it fits under: it likely ran in that one), "overlap" (its kernels ran
  while other kernels did: device time shared or attributed across streams), "bytes" (only the
  bandwidth roof is exceeded: the bytes formula counts traffic that caches served), else
  "unknown". Flagged rows are left out of MFU and MBU.
- MFU of a step = sum over its operators of FLOPs / peak FLOP/s of the operator's precision,
  divided by the step's duration: the fraction of the step the device would need at peak
  (the usual FLOPs / (time * peak) when one precision dominates). Per GPU in the Overview.
  MBU of a step = its operators' bytes / (step duration * peak bandwidth).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..launch import device_properties
from ..memo import memoised
from ..optree import OpTree, build_op_tree
from ..steps import compute_steps
from .compiled import enclosing
from .flops import op_flops
from .hardware import PEAKS, architecture, device_vendor, match_peaks, matrix_unit_name, peak_tflops
from .precision import node_kernel_facts, op_precision

#: A row more than this factor above its roof is flagged and left out of MFU/MBU.
ABOVE_ROOF = 1.05


def device_info(table: TraceTable, device: int) -> dict[str, Any]:
    """Vendor, architecture and matched peaks of one GPU of the trace; device properties the
    peak matching cannot read leave them null with `peaks_reason`."""
    props = device_properties(table, device)
    listed = [p for p in table.metadata.device_properties or [] if isinstance(p, dict)]
    if not props and listed and len({str(p.get("name")) for p in listed}) == 1:
        props = listed[0]  # the GPU is not listed, but every listed GPU is the same model
    vendor = arch = key = reason = None
    try:
        vendor = device_vendor(props, table.metadata.extra)
        arch = architecture(props, vendor)
        key = match_peaks(props, vendor)
    except Exception as exc:  # noqa: BLE001 (the boundary: a field with a reason, not a 500)
        reason = f"device properties not understood: {type(exc).__name__}: {exc}"[:200]
    name = props.get("name")
    return {"id": device, "name": name if isinstance(name, str) else None, "vendor": vendor,
            "architecture": arch, "peaks_model": key, "matrix_units": matrix_unit_name(vendor),
            "peak_tflops": dict(PEAKS[key].tflops) if key else None,
            "memory_tbps": PEAKS[key].memory_tbps if key else None, "peaks_reason": reason}


def flop_nodes(table: TraceTable) -> pd.DataFrame:
    """The outermost FLOP-carrying op nodes: node, event, name, start, flops, bytes, dtype,
    estimate, reason, device_us, host_us, and from their kernels tensor_cores,
    kernel_precision, algorithmic, overlap (`precision.node_kernel_facts`) (computed once).
    An outermost call whose estimate failed stays, with NaN FLOPs and its reason, unless known
    calls lie under it."""
    return memoised(table, "flop_nodes", lambda: _flop_nodes(table))


def _flop_nodes(table: TraceTable) -> pd.DataFrame:
    tree = build_op_tree(table)
    per_op = op_flops(table)
    node_of_event = np.full(len(table.events), -1, dtype=np.int64)
    real = tree.event >= 0
    node_of_event[tree.event[real]] = np.flatnonzero(real)
    nodes = node_of_event[per_op["event"].to_numpy()] if len(per_op) else np.empty(0, int)
    known = (nodes >= 0) & (np.isfinite(per_op["flops"].to_numpy()) |
                            np.isfinite(per_op["bytes"].to_numpy()))
    failed = (nodes >= 0) & ~known & per_op["reason"].notna().to_numpy()
    outer = _outermost(tree, nodes[known])
    # a call whose FLOPs are unknown keeps its row (and reason) unless a known call encloses
    # it or lies under it (then that one counts), or another unknown one encloses it
    failed_outer = _outermost(tree, nodes[failed]) & ~_outermost(tree, nodes[known], True)
    keep = (known & outer[np.maximum(nodes, 0)]) | (failed & failed_outer[np.maximum(nodes, 0)])
    sel, chosen = per_op[keep], nodes[keep]
    group = np.full(len(tree), -1, dtype=np.int64)
    group[chosen] = np.arange(len(chosen))
    owner = enclosing(tree, group >= 0)
    facts = node_kernel_facts(table, tree, np.where(owner >= 0, group[np.maximum(owner, 0)],
                                                    -1), len(chosen))
    return pd.DataFrame({
        "node": chosen,
        "event": sel["event"].to_numpy(),
        "name": tree.name_categories.to_numpy(dtype=object)[tree.name_code[chosen]],
        "start": tree.start[chosen],
        "flops": sel["flops"].to_numpy(),
        "bytes": sel["bytes"].to_numpy(),
        "dtype": sel["dtype"].to_numpy(),
        "estimate": sel["estimate"].to_numpy(),
        "reason": sel["reason"].to_numpy(),
        "device_us": tree.device_total[chosen],
        "host_us": tree.end[chosen] - tree.start[chosen],
        **facts,
    })


def _outermost(tree: OpTree, marked: np.ndarray, related: bool = False) -> np.ndarray:
    """Per node: marked with no marked ancestor; with `related`, any node with a marked
    ancestor-or-self or descendant."""
    mask = np.zeros(len(tree), dtype=bool)
    mask[marked] = True
    above = enclosing(tree, mask)[np.maximum(tree.parent, 0)]
    if not related:
        return mask & ((tree.parent < 0) | (above < 0))
    count = np.concatenate(([0], np.cumsum(mask)))
    below = count[tree.subtree_end] - count[np.arange(len(tree)) + 1] > 0
    return mask | below | ((tree.parent >= 0) & (above >= 0))


def _main_device(table: TraceTable) -> Optional[int]:
    tree = build_op_tree(table)
    rows = tree.device_rows
    if not len(rows):
        return None
    device = pd.to_numeric(table.device_args.drop_duplicates("event").set_index("event")
                           .reindex(rows)["device"], errors="coerce").dropna()
    return int(device.mode().iloc[0]) if len(device) else 0


def build_roofline(table: TraceTable) -> dict[str, Any]:
    """Per operator name, dtype and precision: FLOPs, bytes, time, achieved TFLOP/s and TB/s,
    intensity, bound, MBU, above-roof flag; the device and its peaks; MFU and MBU per step.
    See the module docstring."""
    return memoised(table, "roofline", lambda: _build_roofline(table))


def _build_roofline(table: TraceTable) -> dict[str, Any]:
    nodes = flop_nodes(table)
    device = _main_device(table)
    info = device_info(table, device) if device is not None else None
    key = info["peaks_model"] if info else None
    vendor = info["vendor"] if info else None
    on_gpu = device is not None
    combos, uniq = pd.factorize(pd.MultiIndex.from_arrays(
        [nodes["dtype"].fillna(""), nodes["kernel_precision"], nodes["tensor_cores"]]))
    precision = np.array([op_precision(d or None, k or None, bool(tc), vendor)
                          for d, k, tc in uniq], dtype=object)[combos]
    work = nodes.assign(time_us=nodes["device_us"] if on_gpu else nodes["host_us"],
                        dtype=nodes["dtype"].fillna("unknown"), precision=precision)
    grouped = work.groupby(["name", "dtype", "precision"], sort=False).agg(
        calls=("flops", "size"), flops=("flops", lambda v: float(v.sum(min_count=1))),
        bytes=("bytes", lambda v: float(v.sum(min_count=1))), time_us=("time_us", "sum"),
        estimate=("estimate", "any"), algorithmic=("algorithmic", "any"),
        overlap=("overlap", "any"),
        reason=("reason", lambda v: next((r for r in v if isinstance(r, str)), None))
    ).reset_index()
    grouped = grouped.sort_values(["flops", "name"], ascending=[False, True])
    rows = [_row(r, key, info) for r in grouped.itertuples()]
    flagged = {(r["name"], r["dtype"], r["precision"]) for r in rows if r["above_roof"]}
    keep = ~pd.MultiIndex.from_arrays([work["name"], work["dtype"], work["precision"]]).isin(
        list(flagged)) if flagged else np.ones(len(work), dtype=bool)
    return {"device": info, "time_basis": "device" if on_gpu else "host", "rows": rows,
            "steps": _steps(table, work[keep] if len(work) else work, key, info)}


def _ratio(a: float, b: float) -> Optional[float]:
    return float(a / b) if b > 0 and np.isfinite(a) and a > 0 else None


def _row(r: Any, key: Optional[str], info: Optional[dict[str, Any]]) -> dict[str, Any]:
    seconds = r.time_us * 1e-6
    tflops = _ratio(r.flops, seconds * 1e12)
    tbps = _ratio(r.bytes, seconds * 1e12)
    intensity = _ratio(r.flops, r.bytes)
    peak = peak_tflops(key, r.precision) if key else None
    bandwidth = info["memory_tbps"] if key and info else None
    bound = None
    if peak and bandwidth and intensity is not None:
        bound = "compute" if intensity >= peak / bandwidth else "memory"
    return {"name": r.name, "dtype": r.dtype, "precision": r.precision, "calls": int(r.calls),
            "flops": float(r.flops) if np.isfinite(r.flops) else None,
            "bytes": float(r.bytes) if np.isfinite(r.bytes) else None,
            "time_us": round(float(r.time_us), 3), "achieved_tflops": tflops,
            "achieved_tbps": tbps, "intensity": intensity, "bound": bound,
            "peak_tflops": peak, "estimate": bool(r.estimate),
            "flops_reason": r.reason if isinstance(r.reason, str) else None,
            "mbu_pct": tbps / bandwidth * 100.0 if tbps is not None and bandwidth else None,
            "above_roof": _above_roof(r, tflops, tbps, peak, bandwidth, key)}


def _above_roof(r: Any, tflops: Optional[float], tbps: Optional[float], peak: Optional[float],
                bandwidth: Optional[float], key: Optional[str]) -> Optional[str]:
    """The likely reason a row is more than 5% above its roof, None when it is not (see the
    module docstring)."""
    over_compute = tflops is not None and peak is not None and tflops > ABOVE_ROOF * peak
    over_memory = tbps is not None and bandwidth is not None and tbps > ABOVE_ROOF * bandwidth
    if not (over_compute or over_memory):
        return None
    if over_compute and r.algorithmic and "conv" in r.name.lower():
        return "algorithmic_flops"
    if over_compute and key and tflops is not None and any(
            tflops <= ABOVE_ROOF * v for v in PEAKS[key].tflops.values() if v > (peak or 0)):
        return "precision"
    if r.overlap:
        return "overlap"
    return "unknown" if over_compute else "bytes"


def _steps(table: TraceTable, work: pd.DataFrame, key: Optional[str],
           info: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = compute_steps(table)
    if not len(steps):
        return []
    index = np.searchsorted(steps.host_starts, work["start"].to_numpy(), side="right") - 1
    inside = (index >= 0) & (work["start"].to_numpy() < steps.host_ends[np.maximum(index, 0)])
    flops = np.nan_to_num(work["flops"].to_numpy(dtype=float))
    nbytes = np.nan_to_num(work["bytes"].to_numpy(dtype=float))
    kinds, names = pd.factorize(work["precision"])
    peaks = np.array([peak_tflops(key, p) or np.nan for p in names], dtype=float)[kinds] * 1e12
    with np.errstate(divide="ignore", invalid="ignore"):
        ideal = np.where(np.isfinite(peaks), flops / peaks, 0.0)
    per_flops = np.bincount(index[inside], weights=flops[inside], minlength=len(steps))
    per_ideal = np.bincount(index[inside], weights=ideal[inside], minlength=len(steps))
    per_bytes = np.bincount(index[inside], weights=nbytes[inside], minlength=len(steps))
    bandwidth = info["memory_tbps"] if key and info else None
    out = []
    for i, name in enumerate(steps.names):
        seconds = float(steps.lengths[i]) * 1e-6
        mfu = float(per_ideal[i] / seconds * 100.0) if key and seconds > 0 else None
        mbu = float(per_bytes[i] / (seconds * bandwidth * 1e12) * 100.0) if (
            bandwidth and seconds > 0) else None
        out.append({"step": name, "flops": float(per_flops[i]), "bytes": float(per_bytes[i]),
                    "tflops": float(per_flops[i] / seconds / 1e12) if seconds > 0 else None,
                    "mfu_pct": mfu, "mbu_pct": mbu})
    return out


def mfu_pct(table: TraceTable) -> Optional[float]:
    """MFU over all steps (their FLOPs at peak / their summed duration), percent; None when
    the device's peaks are unknown or there are no steps."""
    payload = build_roofline(table)
    steps = compute_steps(table)
    if payload["device"] is None or payload["device"]["peaks_model"] is None or not len(steps):
        return None
    total = float(steps.lengths.sum()) * 1e-6
    ideal = sum(s["mfu_pct"] / 100.0 * float(steps.lengths[i]) * 1e-6
                for i, s in enumerate(payload["steps"]) if s["mfu_pct"] is not None)
    return ideal / total * 100.0 if total > 0 else None


def mbu_pct(table: TraceTable) -> Optional[float]:
    """MBU over all steps (their bytes / (summed duration * peak bandwidth)), percent; None
    when the device's bandwidth is unknown or there are no steps."""
    payload = build_roofline(table)
    steps = compute_steps(table)
    device = payload["device"]
    if device is None or not device["memory_tbps"] or not len(steps):
        return None
    total = float(steps.lengths.sum()) * 1e-6
    moved = sum(s["bytes"] for s in payload["steps"])
    return moved / (total * device["memory_tbps"] * 1e12) * 100.0 if total > 0 else None


def trace_matrix_units(table: TraceTable) -> str:
    """"matrix cores" when the trace's main GPU is an AMD one, else "tensor cores"."""
    device = _main_device(table)
    vendor = device_info(table, device)["vendor"] if device is not None else device_vendor(
        {}, table.metadata.extra)
    return matrix_unit_name(vendor)
