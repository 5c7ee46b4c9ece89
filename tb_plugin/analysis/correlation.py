"""Who launched what: device events -> launches (by `correlation`) -> operators (by external id).

- A device event (kernel, memcpy, memset) joins the launch with the same `correlation`. Launches
  are CUDA/HIP runtime calls *and* driver calls: `cuLaunchKernel` (cat `cuda_driver`) is how
  Triton and other JITs launch kernels, which the reference ignored (its bug 7.7). One launch
  may start several device events (`cudaLaunchCooperativeKernelMultiDevice`).
- A launch joins the operator whose external id equals its own: Kineto stamps a launch with the
  External id of the innermost enclosing `cpu_op` (PyTorch 1.x writes it as "external id").
  External id 0 means "no operator": the launch belongs to its thread's root.
- Some PyTorch 2.1-era traces stamp launches with External id = correlation id, which is no op's
  id (and may collide with a random one); `external_ids_usable` detects that, and the op tree then
  attaches launches by time (innermost node open on the launching thread), as it does for
  launches without an id or with an unknown one.
- Kernels whose launch never appears are "staled"; the op tree parks them on the main thread.

Everything is a join over sorted ids; nothing loops over events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..ingest.schema import DEVICE_KINDS, LAUNCH_KINDS, Kind, TraceTable
from .memo import memoised


@dataclass
class Launches:
    """Device events and launches of one trace, as event row numbers."""

    device_rows: np.ndarray  # kernels, memcpy and memset (complete events)
    device_launch: np.ndarray  # per device row: the launch's event row, -1 when staled
    launch_rows: np.ndarray  # runtime and driver calls (complete events)

    @property
    def staled_rows(self) -> np.ndarray:
        return self.device_rows[self.device_launch < 0]


def complete_rows(events: pd.DataFrame, kinds: tuple[Kind, ...]) -> np.ndarray:
    """Rows of complete (`X`) events of the given kinds with a usable duration, in row order."""
    kind = events["kind"].to_numpy()
    mask = np.isin(kind, np.asarray(kinds, dtype=kind.dtype))
    mask &= np.isfinite(events["dur"].to_numpy()) & np.isfinite(events["ts"].to_numpy())
    ph = events["ph"]
    x_codes = np.flatnonzero(ph.cat.categories == "X")
    mask &= np.isin(ph.cat.codes.to_numpy(), x_codes)
    return np.flatnonzero(mask)


def launches(table: TraceTable) -> Launches:
    """Device event -> launch links of a table, computed once."""
    return memoised(table, "launches", lambda: _launches(table.events))


def _launches(events: pd.DataFrame) -> Launches:
    device_rows = complete_rows(events, DEVICE_KINDS)
    launch_rows = complete_rows(events, LAUNCH_KINDS)
    corr = events["correlation"].to_numpy()
    first = first_launch_per_correlation(launch_rows, corr[launch_rows],
                                         events["ts"].to_numpy()[launch_rows])
    return Launches(device_rows, lookup(first, corr[device_rows]), launch_rows)


def first_launch_per_correlation(rows: np.ndarray, corr: np.ndarray,
                                 ts: np.ndarray) -> pd.Series:
    """correlation -> the earliest launch row with it (ties by row), a sorted-index Series."""
    keep = np.isfinite(corr)
    rows, corr, ts = rows[keep], corr[keep], ts[keep]
    order = np.lexsort((rows, ts, corr))
    corr, rows = corr[order], rows[order]
    first = np.ones(len(corr), dtype=bool)
    first[1:] = corr[1:] != corr[:-1]
    return pd.Series(rows[first], index=corr[first])


def lookup(series: pd.Series, keys: np.ndarray, missing: int = -1) -> np.ndarray:
    """`series[key]` for each key of a unique-index Series, `missing` where absent or NaN."""
    if len(series) == 0:
        return np.full(len(keys), missing, dtype=np.int64)
    index = series.index.to_numpy()
    pos = np.searchsorted(index, keys)
    pos = np.minimum(pos, len(index) - 1)
    found = index[pos] == keys
    return np.where(found, series.to_numpy()[pos], missing).astype(np.int64)


def match_external_ids(launch_ext: np.ndarray, op_ext: np.ndarray,
                       op_priority: np.ndarray) -> np.ndarray:
    """Per launch: the index (into the op arrays) of the op with its external id, else -1.

    When several ops share an id the one with the lowest `op_priority` wins (the reference
    walks threads in first-seen order and ops by time, and the first op takes all the launches).
    External id 0 ("no operator") and NaN never match.
    """
    usable = np.isfinite(op_ext) & (op_ext != 0)
    idx = np.flatnonzero(usable)
    order = np.lexsort((op_priority[idx], op_ext[idx]))
    idx = idx[order]
    ext = op_ext[idx]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = ext[1:] != ext[:-1]
    table = pd.Series(idx[first], index=ext[first])
    keys = np.where(launch_ext == 0, np.nan, launch_ext)
    return lookup(table, keys)


def external_ids_usable(launch_ext: np.ndarray, launch_corr: np.ndarray) -> bool:
    """False when most launches carry their correlation id as "External id" (a Kineto bug of the
    PyTorch 2.1 era): those ids then say nothing about operators."""
    stamped = np.isfinite(launch_ext) & (launch_ext != 0)
    if not stamped.any():
        return True
    return float(np.mean(launch_ext[stamped] == launch_corr[stamped])) < 0.5
