"""Memory timeline by category from a `export_memory_timeline` raw export (`*.raw.json.gz`).

The export is a JSON list of `[ts_ns, action, bytes, category]` records written by
`torch.profiler._memory_profiler.MemoryProfileTimeline.export_memory_timeline_raw`:
- action: `_ACTION_TO_INDEX` = Action enum values PREEXISTING=1, CREATE=2, INCREMENT_VERSION=3,
  DESTROY=4; the sign of `bytes` is already applied (DESTROY and the old version's half of
  INCREMENT_VERSION are negative);
- category: `_CATEGORY_TO_INDEX` = position in `_CATEGORY_TO_COLORS`: PARAMETER, OPTIMIZER_STATE,
  INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, then None (UNKNOWN);
- ts -1 marks memory that existed before profiling; like torch's `_coalesce_timeline` it is
  placed at the earliest real timestamp.

The file is streamed: records are matched in decompressed chunks (8 MB) with one regex per
chunk and converted to int64 arrays, so at most one chunk's records exist as Python objects.
Records that are not four integers, or carry an unknown action or category, are skipped and
counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Optional, Union

import numpy as np

from ..ingest.schema import TraceTable
from ..payloads import MemoryTimelinePayload
from ..storage import FileRef, iter_decompressed
from .memory_curves import downsample
from .memory_leaks import LEAK_GROWTH_BYTES, LEAK_MIN_STEPS, growth_leak
from .steps import compute_steps

ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}
PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY = 1, 2, 3, 4
CATEGORIES = ("PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
              "AUTOGRAD_DETAIL", "UNKNOWN")
DEFAULT_MAX_POINTS = 2000
#: Categories that legitimately outlive a step: weights, optimizer state and gradients.
EXPECTED_TO_STAY = ("PARAMETER", "OPTIMIZER_STATE", "GRADIENT")
#: Without step boundaries, growth is checked over this many equal slices of the timeline.
DEFAULT_WINDOWS = 4

_RECORD = re.compile(rb"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
_TRACE_SUFFIX = re.compile(r"\.pt\.trace\.json(?:\.gz)?$")
_RAW_SUFFIX = re.compile(r"\.raw\.json(?:\.gz)?$")
#: Every innermost non-empty list, well-formed or not (the outer list encloses brackets, so it
#: never matches).
_ANY_RECORD = re.compile(rb"\[[^\[\]]*[^\[\]\s][^\[\]]*\]")


@dataclass
class RawTimeline:
    """Records in file order: ts in ns (-1 = pre-existing), action code, signed bytes, category
    index into CATEGORIES."""

    ts_ns: np.ndarray
    action: np.ndarray
    bytes: np.ndarray
    category: np.ndarray
    skipped: int = 0
    messages: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts_ns)


Source = Union[FileRef, str, Path, BinaryIO]


def read_raw_timeline(source: Source) -> RawTimeline:
    """Stream a raw export (gzipped or plain) from a FileRef, a path or an open binary file."""
    if isinstance(source, FileRef):
        with source.open() as handle:
            return _read(handle)
    if isinstance(source, (str, Path)):
        with open(source, "rb") as handle:
            return _read(handle)
    return _read(source)


def _read(handle: BinaryIO) -> RawTimeline:
    parts: list[np.ndarray] = []
    skipped, tail = 0, b""
    truncated: list[str] = []
    for chunk in iter_decompressed(handle, on_truncated_gzip=truncated.append):
        buffer = tail + chunk
        cut = buffer.rfind(b"]") + 1  # records never nest: this ends a complete record
        records, bad = _parse(buffer[:cut])
        parts.append(records)
        skipped += bad
        tail = buffer[cut:]
    skipped += int(b"[" in tail)  # a record cut off by the end of the file
    data = np.concatenate(parts) if parts else np.empty((0, 4), dtype=np.int64)
    return _validated(data, skipped, truncated)


def _parse(body: bytes) -> tuple[np.ndarray, int]:
    """The four-integer records of a chunk as an (n, 4) int64 array, and how many others."""
    found = _RECORD.findall(body)
    total = len(_ANY_RECORD.findall(body))
    if not found:
        return np.empty((0, 4), dtype=np.int64), total
    return np.array(found, dtype=np.bytes_).astype(np.int64), total - len(found)


def _validated(data: np.ndarray, skipped: int, truncated: list[str]) -> RawTimeline:
    ok = np.isin(data[:, 1], list(ACTIONS)) & (data[:, 3] >= 0) & (data[:, 3] < len(CATEGORIES))
    skipped += int((~ok).sum())
    data = data[ok]
    messages = []
    if skipped:
        messages.append(f"Skipped {skipped} malformed memory-timeline record(s): each record "
                        "must be [ts_ns, action 1-4, bytes, category 0-7].")
    if truncated:
        messages.append(f"The memory-timeline file is truncated ({truncated[0]}); the records "
                        "before the cut are shown.")
    return RawTimeline(data[:, 0], data[:, 1], data[:, 2], data[:, 3], skipped, messages)


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


def build_memory_timeline(source: Union[Source, RawTimeline],
                          step_ends_us: Optional[np.ndarray] = None,
                          step_names: Optional[list[str]] = None,
                          max_points: int = DEFAULT_MAX_POINTS,
                          base_time_ns: Optional[int] = None) -> MemoryTimelinePayload:
    """Stacked bytes per category over time (after all records at each time), down-sampled to at
    most `max_points` points keeping the first, the last and each bin's min and max total.

    Times are (ts_ns - base_time_ns) / 1000: with the trace's `baseTimeNanoseconds` they are on
    the trace clock, and `step_ends_us` (trace step ends) drive the step-over-step growth check;
    without steps the timeline is cut into equal windows.
    """
    raw = source if isinstance(source, RawTimeline) else read_raw_timeline(source)
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


def matching_timeline(trace_name: str, timelines: list[FileRef]) -> Optional[FileRef]:
    """The export written next to a trace (`<worker>[.<ts>].raw.json[.gz]` for
    `<worker>[.<ts>].pt.trace.json[.gz]`), else the only export of a run with no such pairing."""
    stem = _TRACE_SUFFIX.sub("", trace_name)
    for ref in timelines:
        if _RAW_SUFFIX.sub("", ref.name) == stem:
            return ref
    return timelines[0] if len(timelines) == 1 and not _paired(timelines[0]) else None


def _paired(ref: FileRef) -> bool:
    """Whether an export is named after a trace file (worker plus timestamp)."""
    return bool(re.search(r"\.\d+\.raw\.json(?:\.gz)?$", ref.name))


def build_memory_timeline_for(table: TraceTable, source: Union[Source, RawTimeline],
                              max_points: int = DEFAULT_MAX_POINTS) -> MemoryTimelinePayload:
    """The timeline of the span a trace belongs to, on that trace's clock and steps."""
    steps = compute_steps(table)
    ends = steps.ends if steps.from_markers and len(steps) else None
    return build_memory_timeline(source, ends, steps.names if ends is not None else None,
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
    """Growth of the total at each step end (or window end), and memory created while profiling
    and never destroyed, per category (parameters and optimizer state are expected to stay)."""
    if len(raw) == 0:
        return []
    data = _sort(raw, base_time_ns)
    t_us = data.t_us[data.ends]
    basis = "steps"
    if step_ends_us is None:
        basis = "windows"
        step_ends_us = np.linspace(t_us[0], t_us[-1], DEFAULT_WINDOWS + 1)[1:]
        step_names = [f"window {i + 1}" for i in range(DEFAULT_WINDOWS)]
    names = list(step_names) if step_names else [str(i) for i in range(len(step_ends_us))]
    flag = growth_leak(t_us, data.total.astype(np.float64), names,
                       np.asarray(step_ends_us, dtype=np.float64), min_steps, threshold)
    out = [{**flag, "basis": basis}] if flag else []
    unfreed = _unfreed(raw)
    return out + ([unfreed] if unfreed else [])


def _unfreed(raw: RawTimeline) -> Optional[dict[str, Any]]:
    """Bytes alive at the end minus bytes alive before profiling, per category: what was created
    while profiling and never destroyed. Categories are compared as a whole because a tensor may
    change category between its creation and its destruction (INCREMENT_VERSION)."""
    n = len(CATEGORIES)
    size = raw.bytes.astype(np.float64)
    alive = np.bincount(raw.category, weights=size, minlength=n)
    pre = raw.action == PREEXISTING
    before = np.bincount(raw.category[pre], weights=size[pre], minlength=n)
    grown = alive - before
    rows = [{"category": CATEGORIES[i], "bytes": int(grown[i])}
            for i in np.argsort(-grown, kind="stable")
            if grown[i] > 0 and CATEGORIES[i] not in EXPECTED_TO_STAY]
    if not rows:
        return None
    alive_count = int((raw.action == CREATE).sum() - (raw.action == DESTROY).sum())
    return {"kind": "unfreed", "count": alive_count, "bytes": sum(r["bytes"] for r in rows),
            "by_category": rows}


def _floats(values: np.ndarray) -> list[float]:
    return [round(v, 3) for v in np.asarray(values, dtype=np.float64).tolist()]
