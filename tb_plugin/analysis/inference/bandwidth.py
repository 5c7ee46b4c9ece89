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


def weight_bytes(dims: Any, types: Any) -> Optional[float]:
    """The weight operand of one `aten::mm` / `aten::addmm` call: its last 2-D input."""
    shapes, names = _list(dims, json.loads), _list(types, ast.literal_eval)
    for i in range(len(shapes) - 1, -1, -1):
        shape = shapes[i]
        if isinstance(shape, list) and len(shape) == 2 and _numel(shape) is not None:
            size = TYPE_SIZES.get(names[i]) if i < len(names) else None
            return float(_numel(shape) * size) if size else None
    return None


def kv_bytes_per_token(dims: Any, types: Any) -> Optional[float]:
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
    windows = _step_windows(steps, merged, capture) if capture is not None else None
    theirs = _ShapeOps(capture) if capture is not None else None
    gemm = categories[categories["category"] == GEMM]
    out = []
    for i, s in enumerate(steps.itertuples()):
        w = [weight_bytes(*own.shapes(r)) for r in own.inside(own.gemm, s.thread, s.start, s.end)]
        k = [kv_bytes_per_token(*own.shapes(r))
             for r in own.inside(own.kv, s.thread, s.start, s.end)]
        for window in (windows[i] if windows is not None else []):
            w += [weight_bytes(*theirs.shapes(r)) for r in theirs.inside(theirs.gemm, *window)]
            k += [kv_bytes_per_token(*theirs.shapes(r)) for r in theirs.inside(theirs.kv, *window)]
        launched_by = gemm["operator"].reindex(s.events).dropna()
        foreign = sorted(set(launched_by[~launched_by.isin(GEMM_OPS)]))
        out.append(_estimate(s, w, k, foreign))
    return pd.DataFrame(out, index=steps.index,
                        columns=["weight_bytes", "kv_bytes_per_token", "bytes", "reason"])


def _estimate(s: Any, w: list[Optional[float]], k: list[Optional[float]], foreign: list[str]
              ) -> dict[str, Any]:
    attended = np.nansum([s.context_kv_tokens, s.generation_kv_tokens]) \
        if np.isfinite(s.context_kv_tokens) or np.isfinite(s.generation_kv_tokens) else np.nan
    weights = float(sum(v for v in w if v is not None))
    per_token = float(sum(v for v in k if v is not None))
    reason = None
    if not any(v is not None for v in w):
        reason = "no GEMM (aten::mm/addmm) input shapes inside the step"
    elif not any(v is not None for v in k):
        reason = "no KV-cache write (store_cache, reshape_and_cache) input shapes inside " \
                 "the step"
    elif not np.isfinite(attended):
        reason = "the step annotation does not say how many KV tokens are attended (sk)"
    elif foreign:
        reason = ("GEMM kernels launched outside aten::mm/addmm (" + ", ".join(
            n or "no operator" for n in foreign[:3]) + "): their weights cannot be sized")
    total = weights + per_token * attended if reason is None else np.nan
    return {"weight_bytes": weights, "kv_bytes_per_token": per_token, "bytes": total,
            "reason": reason}


class _ShapeOps:
    """The GEMM and KV-cache write operators of one trace, with their threads and starts."""

    def __init__(self, table: TraceTable) -> None:
        events = table.events
        self.args = table.op_args.drop_duplicates("event").set_index("event")
        kind = events["kind"].to_numpy()
        names = np.asarray(events["name"].cat.categories.astype(str), dtype=object)
        ops = np.flatnonzero(kind == Kind.CPU_OP)
        op_names = names[events["name"].cat.codes.to_numpy()[ops]]
        self.gemm = ops[np.isin(op_names, GEMM_OPS)]
        self.kv = ops[np.fromiter((bool(KV_WRITE_RE.search(n)) for n in op_names), bool,
                                  len(ops))]
        self.ts, self.tid = events["ts"].to_numpy(), events["tid"].cat.codes.to_numpy()

    def inside(self, rows: np.ndarray, thread: int, start: float, end: float) -> np.ndarray:
        """The rows starting in [start, end) on `thread`."""
        ts = self.ts[rows]
        return rows[(self.tid[rows] == thread) & (ts >= start) & (ts < end)]

    def shapes(self, row: int) -> tuple[Any, Any]:
        if row not in self.args.index or "input_dims" not in self.args.columns:
            return None, None
        return self.args.at[row, "input_dims"], self.args.at[row, "input_types"]


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
