"""Replay one step's dependency model (`model.py`) with edited durations.

Every node keeps the dependencies and the constant slack it had in the trace; only the edited
durations change, and everything downstream moves with them. Nodes are replayed in the order
they ended in the trace, which is a topological order of the dependencies (a launch ends before
its kernel, a stream's previous event before the next, a waited-for event before the wait, the
previous call of a thread before the next). With no edit (or factors of 1) the replay
reproduces the trace's times exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ranges as rg
from .model import StepModel


@dataclass
class Scaling:
    """Per-node factors and per-gap reductions (us) that the edits resolve to for a step."""

    call: np.ndarray  # factor on each call's own duration
    device: np.ndarray  # factor on each device event's duration
    gap_cut: np.ndarray  # us removed from the gap before each call (negative: added)
    tail_cut: float  # us removed from the step thread's last gap (before the step end)
    sync: float  # factor on the time a call waits for the device


@dataclass
class Replay:
    predicted_us: float
    call_start: np.ndarray
    call_end: np.ndarray
    dev_start: np.ndarray
    dev_end: np.ndarray
    wait_us: float  # time the step's own thread spent waiting for the device
    host_us: float  # the step thread's end (host) minus the step start
    device_us: float  # busy time of the busiest device (merged events)


class _PrefixMax:
    """Fenwick tree: max of values set at positions <= i."""

    def __init__(self, n: int) -> None:
        self.tree = np.full(n + 1, -np.inf)

    def set(self, i: int, value: float) -> None:
        i += 1
        while i < len(self.tree):
            if self.tree[i] < value:
                self.tree[i] = value
            i += i & -i

    def get(self, i: int) -> float:  # max over positions 0..i-1
        best = -np.inf
        while i > 0:
            best = max(best, self.tree[i])
            i -= i & -i
        return best


def replay(m: StepModel, s: Scaling) -> Replay:
    n_call, n_dev = len(m.call_row), len(m.dev_row)
    c_start, c_end = np.full(n_call, np.nan), np.full(n_call, np.nan)
    d_start, d_end = np.full(n_dev, np.nan), np.full(n_dev, np.nan)
    prev_call = np.arange(n_call) - 1
    if n_call:
        first = np.ones(n_call, dtype=bool)
        first[1:] = m.call_thread[1:] != m.call_thread[:-1]
        prev_call[first] = -1
    # device events launched before each position in launch-time order (for syncs)
    launch_ts = m.call_ts[m.dev_call] if n_dev else np.empty(0)
    by_launch = np.argsort(launch_ts, kind="stable")
    rank = np.empty(n_dev, dtype=np.int64)
    rank[by_launch] = np.arange(n_dev)
    sorted_launch = launch_ts[by_launch]
    waited_new, waited_orig = _PrefixMax(n_dev), _PrefixMax(n_dev)
    own_max_new = np.full(n_call, -np.inf)
    own_max_orig = np.full(n_call, -np.inf)
    wait_us = 0.0

    def start_of(c: int) -> float:
        if np.isnan(c_start[c]):
            p = prev_call[c]
            if p < 0:
                anchor = m.start if m.call_thread[c] == m.main else m.call_ts[c]
                before, gap = anchor, m.call_ts[c] - anchor
            else:
                before, gap = c_end[p], m.call_ts[c] - m.call_end[p]
            c_start[c] = before + gap - min(s.gap_cut[c], max(gap, 0.0))
        return c_start[c]

    # ties: calls before device events (concatenated first, stable sort)
    order = np.argsort(np.concatenate([m.call_end, m.dev_end]), kind="stable")
    for node in order:
        if node < n_call:
            c = int(node)
            begin = start_of(c)
            dur = m.call_end[c] - m.call_ts[c]
            if m.call_sync[c]:
                k = int(np.searchsorted(sorted_launch, m.call_ts[c], side="left"))
                w_new, w_orig = waited_new.get(k), waited_orig.get(k)
            elif m.call_blocking[c]:
                w_new, w_orig = own_max_new[c], own_max_orig[c]
            else:
                w_new = w_orig = -np.inf
            if np.isfinite(w_orig):  # waits for device work: its own part is the tail after it
                tail = m.call_end[c] - max(m.call_ts[c], w_orig)
                wait = s.sync * max(w_new - begin, 0.0)
                c_end[c] = begin + wait + max(tail, 0.0) * s.call[c]
                if m.call_thread[c] == m.main:
                    wait_us += wait
            else:
                c_end[c] = begin + dur * s.call[c]
        else:
            d = int(node) - n_call
            c = int(m.dev_call[d])
            q = int(m.dev_prev[d])
            if m.dev_inside[d]:
                base, base_orig = start_of(c) + (m.dev_start[d] - m.call_ts[c]), m.dev_start[d]
            else:
                base, base_orig = c_end[c], m.call_end[c]
            ready = max(base, d_end[q]) if q >= 0 else base
            ready_orig = max(base_orig, m.dev_end[q]) if q >= 0 else base_orig
            d_start[d] = ready + max(m.dev_start[d] - ready_orig, 0.0)
            d_end[d] = d_start[d] + (m.dev_end[d] - m.dev_start[d]) * s.device[d]
            waited_new.set(int(rank[d]), d_end[d])
            waited_orig.set(int(rank[d]), m.dev_end[d])
            own_max_new[c] = max(own_max_new[c], d_end[d])
            own_max_orig[c] = max(own_max_orig[c], m.dev_end[d])
    host = _step_end(m, s, c_end) - m.start
    device = busiest(m.dev_device, d_start, d_end)
    return Replay(host, c_start, c_end, d_start, d_end, wait_us, host, device)


def busiest(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> float:
    """Busy time (merged intervals) of the busiest device."""
    best = 0.0
    for d in np.unique(device):
        mine = device == d
        best = max(best, rg.total_length(rg.merge(start[mine], end[mine])))
    return best


def _step_end(m: StepModel, s: Scaling, c_end: np.ndarray) -> float:
    """The step thread's last call end plus its last gap, up to the step's host end."""
    mine = np.flatnonzero(m.call_thread == m.main)
    if len(mine) == 0:
        return m.end - min(s.tail_cut, m.end - m.start)
    last = int(mine[-1])
    gap = m.end - m.call_end[last]
    return c_end[last] + gap - min(s.tail_cut, max(gap, 0.0))


def gap_windows(m: StepModel) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Per call, the host gap before it ([gap start, call start)); and the step thread's last
    gap (start, end)."""
    n = len(m.call_row)
    lo = np.empty(n)
    if n:
        first = np.ones(n, dtype=bool)
        first[1:] = m.call_thread[1:] != m.call_thread[:-1]
        lo[1:] = m.call_end[:-1]
        lo[first] = np.where(m.call_thread[first] == m.main, m.start, m.call_ts[first])
        lo = np.minimum(lo, m.call_ts)
    mine = np.flatnonzero(m.call_thread == m.main)
    tail = (float(m.call_end[mine[-1]]) if len(mine) else m.start, m.end)
    return lo, m.call_ts.copy(), tail[0], max(tail[1], tail[0])


def covered(ranges: rg.Ranges, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """|ranges ∩ [lo_i, hi_i)| for each window."""
    return rg.length_in_windows(ranges, lo, hi) if len(lo) else np.empty(0)
