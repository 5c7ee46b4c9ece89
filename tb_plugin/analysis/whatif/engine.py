"""Resolve edits to per-node factors for each step and replay the steps (`build_whatif`)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ...ingest.schema import DEVICE_KINDS, Kind, TraceTable
from .. import ranges as rg
from ..events import (
    HOST_KINDS,
    category_flags,
    comm_kernel_mask,
    comm_op_mask,
    is_dataloader_name,
    kind_mask,
)
from ..steps import STEP_PREFIX
from .edits import Edit
from .model import StepModel, TraceModel, find_step, step_model, trace_model
from .simulate import Scaling, covered, gap_windows, replay

MAX_STEPS = 64
_HOST = HOST_KINDS + (Kind.PYTHON_FUNCTION,)


class StepNotFound(LookupError):
    pass


def build_whatif(table: TraceTable, edits: list[Edit], step: Optional[str] = None
                 ) -> dict[str, Any]:
    """Predicted step times under `edits`, per step (all steps up to `MAX_STEPS`, or `step`)."""
    model = trace_model(table)
    if step is not None and find_step(model, step) is None:
        raise StepNotFound(f"no step {step!r}: the steps are "
                           f"{', '.join(s[0] for s in model.steps[:20]) or 'none'}")
    indices = [find_step(model, step)] if step is not None else list(
        range(min(len(model.steps), MAX_STEPS)))
    host, device = _host_masks(table, edits), _device_masks(table, edits)
    rows = [_step_row(table, model, int(i), edits, host, device) for i in indices]
    original = float(np.mean([r["original_us"] for r in rows])) if rows else 0.0
    predicted = float(np.mean([r["predicted_us"] for r in rows])) if rows else 0.0
    notes = []
    if step is None and len(model.steps) > MAX_STEPS:
        notes.append(f"the first {MAX_STEPS} of {len(model.steps)} steps are replayed")
    if not rows:
        notes.append("the trace has no step to replay")
    return {
        "edits": [str(e) for e in edits],
        "original_us": original, "predicted_us": predicted,
        "saving_us": original - predicted,
        "saving_pct": 100.0 * (original - predicted) / original if original > 0 else 0.0,
        "steps": rows, "notes": notes,
    }


def _step_row(table: TraceTable, model: TraceModel, index: int, edits: list[Edit],
              host: list[Optional[np.ndarray]], device: list[Optional[np.ndarray]]
              ) -> dict[str, Any]:
    m = step_model(model, index)
    base = replay(m, _scaling(table, model, m, [], [], []))
    changed = replay(m, _scaling(table, model, m, edits, host, device))
    original = m.end - m.start
    backlog = max(base.device_us - base.host_us, 0.0)  # device work carried past the step
    changed.predicted_us = max(changed.host_us, changed.device_us - backlog)
    base.predicted_us = max(base.host_us, base.device_us - backlog)
    return {
        "step": m.name, "original_us": original, "predicted_us": changed.predicted_us,
        "saving_us": original - changed.predicted_us,
        "saving_pct": 100.0 * (original - changed.predicted_us) / original if original else 0.0,
        "replayed_us": base.predicted_us,  # the unedited replay: equals original_us
        "wait_us": base.wait_us, "predicted_wait_us": changed.wait_us,
        "calls": int(len(m.call_row)), "device_events": int(len(m.dev_row)),
    }


def _host_masks(table: TraceTable, edits: list[Edit]) -> list[Optional[np.ndarray]]:
    """Per edit: the host events whose time it scales (None: the edit is not about host time)."""
    events = table.events
    host = kind_mask(events, _HOST) & ~category_flags(
        events["name"], lambda n: n.startswith(STEP_PREFIX))  # never the step marker itself
    out: list[Optional[np.ndarray]] = []
    for edit in edits:
        if edit.target == "op":
            out.append(host & category_flags(events["name"], edit.matches))
        elif edit.target == "dataloader":
            out.append(host & category_flags(events["name"], is_dataloader_name))
        elif edit.target == "communication":
            out.append(comm_op_mask(events))
        else:
            out.append(None)
    return out


def _device_masks(table: TraceTable, edits: list[Edit]) -> list[Optional[np.ndarray]]:
    """Per edit: the device events it scales by name or kind (op edits: through launches)."""
    events = table.events
    devices = kind_mask(events, DEVICE_KINDS)
    makers: dict[str, Callable[[Edit], np.ndarray]] = {
        "kernel": lambda e: devices & category_flags(events["name"], e.matches),
        "communication": lambda e: comm_kernel_mask(events),
        "memcpy": lambda e: kind_mask(events, (Kind.MEMCPY, Kind.MEMSET)),
    }
    return [makers[e.target](e) if e.target in makers else None for e in edits]


def _scaling(table: TraceTable, model: TraceModel, m: StepModel, edits: list[Edit],
             host: list[Optional[np.ndarray]], device: list[Optional[np.ndarray]]) -> Scaling:
    n_call, n_dev = len(m.call_row), len(m.dev_row)
    s = Scaling(np.ones(n_call), np.ones(n_dev), np.zeros(n_call), 0.0, 1.0)
    lo, hi, tail_lo, tail_hi = gap_windows(m)
    launching = np.zeros(n_call, dtype=bool)
    launching[m.dev_call] = True
    for edit, mask, dev_mask in zip(edits, host, device):
        if mask is not None:
            _scale_host(model, m, s, edit.factor, mask, (lo, hi, tail_lo, tail_hi))
        if dev_mask is not None:
            s.device[dev_mask[m.dev_row]] *= edit.factor
        if edit.target == "launch":
            s.call[launching & ~m.call_sync & ~m.call_blocking] *= edit.factor
        if edit.target == "sync":
            s.sync *= edit.factor
    return s


def _scale_host(model: TraceModel, m: StepModel, s: Scaling, factor: float, mask: np.ndarray,
                windows: tuple) -> None:
    """Scale the host time that `mask`'s events cover on each thread of the step: the gaps
    they cover, the calls made inside them and the device work those calls launched."""
    lo, hi, tail_lo, tail_hi = windows
    rows = np.flatnonzero(mask & (model.ts < m.end) & (model.ends > m.start))
    threads = set(np.unique(m.call_thread).tolist()) | ({m.main} if m.main >= 0 else set())
    for thread in sorted(threads):
        mine = rows[model.thread[rows] == thread]
        if len(mine) == 0:
            continue
        spans = rg.merge(model.ts[mine], model.ends[mine])
        calls = np.flatnonzero(m.call_thread == thread)
        s.gap_cut[calls] += (1.0 - factor) * covered(spans, lo[calls], hi[calls])
        inside = rg.contains(spans, m.call_ts[calls])  # calls made inside them
        s.call[calls[inside]] *= factor
        s.device[np.isin(m.dev_call, calls[inside])] *= factor
        if thread == m.main:
            s.tail_cut += (1.0 - factor) * float(covered(spans, np.array([tail_lo]),
                                                         np.array([tail_hi]))[0])
    if m.main < 0:  # no step marker and no call: every thread's host time in the step
        spans = rg.merge(model.ts[rows], model.ends[rows])
        s.tail_cut += (1.0 - factor) * float(covered(spans, np.array([m.start]),
                                                     np.array([m.end]))[0])
