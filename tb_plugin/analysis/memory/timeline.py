"""Memory timeline by category from a parsed `export_memory_timeline` raw export.

The export is read (and cached) by ingest (`ingest/memory_export.py`, which documents the record
format); this module only analyses the parsed records:
- ts -1 marks memory that existed before profiling; like torch's `_coalesce_timeline` it is
  placed at the earliest real timestamp;
- the stacked series, the peak and the growth flag are computed over int64 arrays; the flag
  needs the trace's profiler steps (`memory_leaks` has the rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...ingest.memory_export import CATEGORIES, RawTimeline
from ...ingest.schema import TraceTable
from ...views.memory.timeline_payload import MemoryTimelinePayload
from ..numbers import floats3 as _floats
from ..steps import compute_steps
from .curves import downsample
from .leaks import LEAK_GROWTH_BYTES, LEAK_MIN_STEPS, growth_leak

DEFAULT_MAX_POINTS = 2000


# --- the stacked timeline ------------------------------------------------------------------

@dataclass
class _Sorted:
    """Records in time order; `ends` indexes the last record of each distinct timestamp."""

    t_us: np.ndarray
    bytes: np.ndarray
    category: np.ndarray
    ends: np.ndarray

    @property
    def total(self) -> np.ndarray:
        """Bytes alive after all records at each distinct timestamp."""
        return np.cumsum(self.bytes)[self.ends]


def _sort(raw: RawTimeline, base_time_ns: int = 0) -> _Sorted:
    """Pre-existing records (ts -1) go to the earliest real timestamp, as torch plots them;
    times become us since `base_time_ns` (integer maths first, so no ns are lost)."""
    ts = raw.ts_ns.copy()
    real = ts[ts >= 0]
    ts[ts < 0] = real.min() if len(real) else 0
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    last = np.ones(len(ts), dtype=bool)
    last[:-1] = ts[1:] != ts[:-1]
    t_us = (ts - np.int64(base_time_ns)).astype(np.float64) / 1000.0
    return _Sorted(t_us, raw.bytes[order], raw.category[order], np.flatnonzero(last))


def build_memory_timeline(raw: RawTimeline,
                          step_ends_us: Optional[np.ndarray] = None,
                          step_names: Optional[list[str]] = None,
                          max_points: int = DEFAULT_MAX_POINTS,
                          base_time_ns: Optional[int] = None) -> MemoryTimelinePayload:
    """Stacked bytes per category over time (after all records at each time), down-sampled to at
    most `max_points` points keeping the first, the last and each bin's min and max total.

    Times are (ts_ns - base_time_ns) / 1000: with the trace's `baseTimeNanoseconds` they are on
    the trace clock, and `step_ends_us` (trace host step ends) drive the step-over-step growth
    check; without steps there is none.
    """
    base = int(base_time_ns or 0)
    data = _sort(raw, base)
    keep = data.ends[downsample(data.t_us[data.ends], data.total.astype(np.float64),
                                max(4, max_points))] if len(raw) else data.ends
    series = {name: np.cumsum(np.where(data.category == index, data.bytes, 0))[keep]
              for index, name in enumerate(CATEGORIES)}  # one pass per category
    return {
        "categories": list(CATEGORIES),
        "t_us": _floats(data.t_us[keep]),
        "series": {name: [int(v) for v in values] for name, values in series.items()},
        "total": [int(v) for v in np.cumsum(data.bytes)[keep]],
        "peak": _peak(data),
        "records": len(raw),
        "skipped": raw.skipped,
        "messages": list(raw.messages),
        "base_time_ns": base_time_ns,
        "leaks": timeline_leaks(raw, step_ends_us, step_names, base_time_ns=base),
    }


def build_memory_timeline_for(table: TraceTable, raw: RawTimeline,
                              max_points: int = DEFAULT_MAX_POINTS) -> MemoryTimelinePayload:
    """The timeline of the span a trace belongs to, on that trace's clock and steps."""
    steps = compute_steps(table)
    ends = steps.host_ends if steps.from_markers and len(steps) else None
    return build_memory_timeline(raw, ends, steps.names if ends is not None else None,
                                 max_points, table.metadata.base_time_ns or 0)


def _peak(data: _Sorted) -> Optional[dict[str, Any]]:
    if len(data.ends) == 0:
        return None
    total = data.total
    at = int(np.argmax(total))
    return {"bytes": int(total[at]), "t_us": round(float(data.t_us[data.ends][at]), 3)}


# --- leaks -----------------------------------------------------------------------------------

def timeline_leaks(raw: RawTimeline, step_ends_us: Optional[np.ndarray] = None,
                   step_names: Optional[list[str]] = None, min_steps: int = LEAK_MIN_STEPS,
                   threshold: float = LEAK_GROWTH_BYTES, base_time_ns: int = 0
                   ) -> list[dict[str, Any]]:
    """Growth of the total at each profiler step end, by the rule of `memory_leaks`; nothing
    without the trace's steps. What is alive when the export ends is not flagged: weights,
    optimizer state and the last step's tensors legitimately are."""
    if len(raw) == 0 or step_ends_us is None:
        return []
    data = _sort(raw, base_time_ns)
    names = list(step_names) if step_names else [str(i) for i in range(len(step_ends_us))]
    flag = growth_leak(data.t_us[data.ends], data.total.astype(np.float64), names,
                       np.asarray(step_ends_us, dtype=np.float64), min_steps, threshold)
    return [{**flag, "basis": "steps"}] if flag else []
