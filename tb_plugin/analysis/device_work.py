"""Device work as one frame: every kernel, memcpy and memset with its GPU, stream, class and
the host launch that enqueued it. The GPU Idle analyses (`idle.py`, `launch_stats.py`,
`critical_path.py`) all read this frame, so they agree on what ran where.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .correlation import launches
from .events import comm_kernel_mask, event_ends
from .gpu_metrics import device_args_of, event_devices
from .memo import memoised

#: What a device event does (HTA's kernel types): compute kernels, communication kernels (NCCL
#: by name, or launched by a communication op), and memory (memcpy/memset).
COMPUTE, COMMUNICATION, MEMORY = "compute", "communication", "memory"
CLASSES = (COMPUTE, COMMUNICATION, MEMORY)


def device_work(table: TraceTable) -> pd.DataFrame:
    """One row per complete device event, sorted by (device, stream, start): columns `event`
    (row number), `kind` (Kind), `cls` (0 compute, 1 communication, 2 memory), `start`, `end`,
    `dur` (us), `device`, `stream` (NaN when unknown), `launch` (the launch's event row, -1
    when none), `launch_start`, `launch_end` (us, NaN without a launch)."""
    return memoised(table, "device_work", lambda: _device_work(table))


def _device_work(table: TraceTable) -> pd.DataFrame:
    events = table.events
    links = launches(table)
    rows, launch = links.device_rows, links.device_launch
    kind = events["kind"].to_numpy()[rows]
    cls = np.where(np.isin(kind, (Kind.MEMCPY, Kind.MEMSET)), 2,
                   np.where(comm_kernel_mask(events)[rows], 1, 0)).astype(np.int8)
    ts, ends = events["ts"].to_numpy(), event_ends(events)
    has_launch = launch >= 0
    safe = np.where(has_launch, launch, 0)
    frame = pd.DataFrame({
        "event": rows,
        "kind": kind,
        "cls": cls,
        "start": ts[rows],
        "end": ends[rows],
        "device": event_devices(table, rows),
        "stream": _streams(table, rows),
        "launch": launch,
        "launch_start": np.where(has_launch, ts[safe], np.nan),
        "launch_end": np.where(has_launch, ends[safe], np.nan),
    })
    frame["dur"] = frame["end"] - frame["start"]
    frame = frame[np.isfinite(frame["device"].to_numpy())]
    return frame.sort_values(["device", "stream", "start", "end"],
                             ignore_index=True)


def _streams(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """`args.stream`, else the number in the tid ("stream 7" or "7"), else NaN."""
    stream = device_args_of(table, rows)["stream"].to_numpy(dtype=np.float64).copy()
    missing = ~np.isfinite(stream)
    if missing.any():
        tids = table.events["tid"]
        cats = pd.Series(tids.cat.categories.astype(str))
        numbers = pd.to_numeric(cats.str.extract(r"(\d+)\s*$")[0], errors="coerce")
        lookup = np.append(numbers.to_numpy(dtype=np.float64), np.nan)
        stream[missing] = lookup[tids.cat.codes.to_numpy()[rows[missing]]]
    return stream


def log_histogram(values: np.ndarray, lo: float = 0.1, decades: int = 8,
                  per_decade: int = 2) -> dict[str, list[float]]:
    """Counts of `values` (us) in log-spaced bins from `lo`: edges lo*10^(k/per_decade); values
    below `lo` go in the first bin, above the last edge in the last. Empty bins at both ends are
    trimmed (an empty input gives empty lists)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    edges = lo * 10.0 ** (np.arange(decades * per_decade + 1) / per_decade)
    if values.size == 0:
        return {"edges_us": [], "counts": []}
    clipped = np.clip(values, edges[0], np.nextafter(edges[-1], 0.0))
    counts = np.histogram(clipped, bins=edges)[0]
    used = np.flatnonzero(counts)
    first, last = int(used[0]), int(used[-1])
    return {"edges_us": [float(e) for e in edges[first:last + 2]],
            "counts": [int(c) for c in counts[first:last + 1]]}
