"""Bytes a serving step moves through HBM, estimated from the shapes of its own operators
(`record_shapes`), and the utilization of the device's peak bandwidth that implies.

Estimate (documented in the README, "Inference view"):
- weights: every `aten::mm` / `aten::addmm` called inside the step's host range on its thread
  reads its weight operand once: the last 2-D input (`[K, N]`), numel × element size;
- KV cache: a KV-cache write (`store_cache`, `reshape_and_cache*`) per attention layer names
  the per-token K and V rows it writes (its first two inputs: numel / tokens × element size);
  the step's requests read every KV token they attend in every layer, so
  KV bytes = (Σ N_KV of the step's requests, the annotation's `sk`) × Σ over those writes of
  (K + V bytes per token);
- activations, logits and the KV rows written are left out (a few % in decode).
A step that replays a CUDA/HIP graph has its operators in the graph's capture trace: given
that trace (`capture`, paired as `graphs.merge_capture` pairs them), the operators inside
the capture windows its replayed kernels were matched to count as the step's too. A step is
**not estimable** when it has no GEMM shapes, no KV-cache write shapes or no `sk` count (a
graph replay read without its capture), or when GEMM kernels of the step were launched (or
captured) by another operator than those two (a fused MoE, `vllm::moe_forward`: its expert
weights cannot be sized from shapes); it then says which is missing. Utilization = bytes /
`gpu_us` / the device's peak HBM bandwidth (`efficiency.hardware.PEAKS`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import Kind, TraceTable
from ..distributed.comm_bytes import TYPE_SIZES
from ..graph_launches import capture_windows
from ..op_categories import GEMM

GEMM_OPS = ("aten::mm", "aten::addmm")
KV_WRITE_RE = re.compile(r"store_cache|reshape_and_cache", re.IGNORECASE)


def _list(text: Any, loads: Any) -> list:
    if not isinstance(text, str) or not text:
        return []
    try:
        value = loads(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return value if isinstance(value, list) else []


def _numel(shape: Any) -> Optional[int]:
    if not isinstance(shape, list) or not shape or not all(isinstance(v, int) for v in shape):
        return None
    return int(np.prod(shape, dtype=np.int64))


def weight_bytes(dims: Optional[str], types: Optional[str]) -> Optional[float]:
    """The weight operand of one `aten::mm` / `aten::addmm` call: its last 2-D input."""
    shapes, names = _list(dims, json.loads), _list(types, ast.literal_eval)
    for i in range(len(shapes) - 1, -1, -1):
        shape = shapes[i]
        if isinstance(shape, list) and len(shape) == 2 and _numel(shape) is not None:
            size = TYPE_SIZES.get(names[i]) if i < len(names) else None
            return float(_numel(shape) * size) if size else None
    return None


def kv_bytes_per_token(dims: Optional[str], types: Optional[str]) -> Optional[float]:
    """K + V bytes per token of one KV-cache write: its first two inputs, numel / rows."""
    shapes, names = _list(dims, json.loads), _list(types, ast.literal_eval)
    if len(shapes) < 2 or len(names) < 2:
        return None
    total = 0.0
    for shape, name in zip(shapes[:2], names[:2]):
        numel, size = _numel(shape), TYPE_SIZES.get(name)
        if numel is None or not size or shape[0] <= 0:
            return None
        total += numel / shape[0] * size
    return total


def step_bytes(table: TraceTable, steps: pd.DataFrame, categories: pd.DataFrame,
               merged: Optional[pd.DataFrame] = None, capture: Optional[TraceTable] = None
               ) -> pd.DataFrame:
    """Per step (index of `steps`): `weight_bytes`, `kv_bytes_per_token` (Σ over its layers),
    `bytes` (NaN when not estimable) and `reason` (None when estimable). `categories`:
    `op_categories.device_categories` indexed by event; with `capture` and `merged` (its
    `graphs.merge_capture` with `table`), the operators of the capture windows the step's
    replayed kernels came from count too."""
    own = _ShapeOps(table)
    threads = steps["thread"].to_numpy()
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    w_sum, w_known = own.gemm.sums(threads, starts, ends)
    k_sum, k_known = own.kv.sums(threads, starts, ends)
    if capture is not None and merged is not None:
        theirs = _ShapeOps(capture)
        for i, windows in enumerate(_step_windows(steps, merged, capture)):
            for thread, lo, hi in windows:
                a, b = theirs.gemm.sums(np.array([thread]), np.array([lo]), np.array([hi]))
                c, d = theirs.kv.sums(np.array([thread]), np.array([lo]), np.array([hi]))
                w_sum[i] += a[0]
                w_known[i] += b[0]
                k_sum[i] += c[0]
                k_known[i] += d[0]
    foreign = _foreign_gemm(steps, categories)
    out = [_estimate(s, w_sum[i], w_known[i], k_sum[i], k_known[i], foreign.get(i, []))
           for i, s in enumerate(steps.itertuples())]
    return pd.DataFrame(out, index=steps.index,
                        columns=["weight_bytes", "kv_bytes_per_token", "bytes", "reason"])


def _foreign_gemm(steps: pd.DataFrame, categories: pd.DataFrame) -> dict[int, list[str]]:
    """Per step position: the operators other than aten::mm/addmm that launched (or
    captured) GEMM kernels of the step, sorted."""
    owner = steps["events"].explode().dropna()
    if len(owner) == 0:
        return {}
    frame = pd.DataFrame({"step": np.asarray(owner.index), "event": owner.to_numpy(
        dtype=np.int64)})
    gemm = categories[categories["category"] == GEMM]["operator"]
    frame["operator"] = gemm.reindex(frame["event"].to_numpy()).to_numpy()
    frame = frame[frame["operator"].notna() & ~frame["operator"].isin(GEMM_OPS)]
    position = pd.Series(np.arange(len(steps)), index=steps.index)
    return {int(position[k]): sorted(set(g["operator"])) for k, g in frame.groupby("step")}


def _estimate(s: Any, weights: float, weights_known: float, per_token: float,
              kv_known: float, foreign: list[str]) -> dict[str, Any]:
    attended = np.nansum([s.context_kv_tokens, s.generation_kv_tokens]) \
        if np.isfinite(s.context_kv_tokens) or np.isfinite(s.generation_kv_tokens) else np.nan
    reason = None
    if weights_known == 0:
        reason = "no GEMM (aten::mm/addmm) input shapes inside the step"
    elif kv_known == 0:
        reason = "no KV-cache write (store_cache, reshape_and_cache) input shapes inside " \
                 "the step"
    elif not np.isfinite(attended):
        reason = "the step annotation does not say how many KV tokens are attended (sk)"
    elif foreign:
        reason = ("GEMM kernels launched outside aten::mm/addmm (" + ", ".join(
            n or "no operator" for n in foreign[:3]) + "): their weights cannot be sized")
    total = weights + per_token * attended if reason is None else np.nan
    return {"weight_bytes": float(weights), "kv_bytes_per_token": float(per_token),
            "bytes": total, "reason": reason}


class _Sized:
    """Operators of one kind with a size each (NaN: unknown), by thread in start order:
    `sums` adds the known sizes and counts them over [start, end) ranges by binary search."""

    def __init__(self, rows: np.ndarray, sizes: np.ndarray, ts: np.ndarray, tid: np.ndarray
                 ) -> None:
        self.by_thread: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for t in np.unique(tid[rows]):
            mine = np.flatnonzero(tid[rows] == t)
            mine = mine[np.argsort(ts[rows[mine]], kind="stable")]
            known = np.isfinite(sizes[mine])
            self.by_thread[int(t)] = (
                ts[rows[mine]],
                np.concatenate(([0.0], np.cumsum(np.where(known, sizes[mine], 0.0)))),
                np.concatenate(([0], np.cumsum(known))))

    def sums(self, threads: np.ndarray, starts: np.ndarray, ends: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        total = np.zeros(len(threads))
        count = np.zeros(len(threads))
        for t, (ts, size, known) in self.by_thread.items():
            mine = np.flatnonzero(threads == t)
            lo = np.searchsorted(ts, starts[mine], "left")
            hi = np.searchsorted(ts, ends[mine], "left")
            total[mine] = size[hi] - size[lo]
            count[mine] = known[hi] - known[lo]
        return total, count


class _ShapeOps:
    """The GEMM (weight bytes) and KV-cache write (K + V bytes per token) operators of one
    trace, each shape string parsed once."""

    def __init__(self, table: TraceTable) -> None:
        events = table.events
        kind = events["kind"].to_numpy()
        names = np.asarray(events["name"].cat.categories.astype(str), dtype=object)
        ops = np.flatnonzero(kind == Kind.CPU_OP)
        op_names = names[events["name"].cat.codes.to_numpy()[ops]]
        kv = np.fromiter((bool(KV_WRITE_RE.search(n)) for n in op_names), bool, len(ops))
        ts, tid = events["ts"].to_numpy(), events["tid"].cat.codes.to_numpy()
        args = table.op_args.drop_duplicates("event").set_index("event")
        gemm_rows, kv_rows = ops[np.isin(op_names, GEMM_OPS)], ops[kv]
        self.gemm = _Sized(gemm_rows, _sizes(args, gemm_rows, weight_bytes), ts, tid)
        self.kv = _Sized(kv_rows, _sizes(args, kv_rows, kv_bytes_per_token), ts, tid)


def _sizes(args: pd.DataFrame, rows: np.ndarray, size_of: Any) -> np.ndarray:
    """`size_of(dims, types)` per row (NaN when unknown), once per distinct pair."""
    if len(rows) == 0 or "input_dims" not in args.columns:
        return np.full(len(rows), np.nan)
    picked = args.reindex(rows)
    dims = picked["input_dims"].astype(object).where(picked["input_dims"].notna(), None)
    types = picked["input_types"].astype(object).where(picked["input_types"].notna(), None)
    pairs = list(zip(dims.tolist(), types.tolist()))
    found = {pair: size_of(*(v if isinstance(v, str) else None for v in pair))
             for pair in set(pairs)}
    return np.asarray([np.nan if found[p] is None else found[p] for p in pairs],
                      dtype=np.float64)


def _step_windows(steps: pd.DataFrame, merged: pd.DataFrame, capture: TraceTable
                  ) -> list[list[tuple[int, float, float]]]:
    """Per step: the (thread, start, end) of each capture window its replayed kernels were
    matched to (`merged`, `graphs.merge_capture`; windows in start order, as it numbers
    them)."""
    windows = capture_windows(capture).sort_values("start", kind="stable").reset_index(drop=True)
    of_event = dict(zip(merged["event"].tolist(), merged["window"].tolist()))
    out = []
    for events in steps["events"]:
        found = sorted({of_event[e] for e in events if of_event.get(e, -1) >= 0})
        out.append([(int(windows.at[w, "thread"]), float(windows.at[w, "start"]),
                     float(windows.at[w, "end"])) for w in found])
    return out


def graph_note(reason: Optional[str], replay: bool, with_capture: bool = False
               ) -> Optional[str]:
    """The reason, with the graph replay's explanation when the step replays a graph."""
    if reason is None or not replay:
        return reason
    if with_capture:
        return reason + " (a CUDA/HIP graph replay, its capture trace read too)"
    return reason + " (a CUDA/HIP graph replay: its operators and shapes are in the capture " \
                    "trace)"
