"""Step-time breakdown: each microsecond of a step goes to the highest-priority role busy then.

Priority (spec 3.6): Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec >
Other. Role ranges are merged unions over the whole trace; one global pass over the union of all
steps assigns time role by role, and per-step costs are read off with prefix sums. Unlike the
reference, every role is intersected with what is left (its "slot reset" bug let a role count
time a higher role already took), so the categories of a step always sum to its length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from . import ranges as rg
from .events import (
    HOST_KINDS,
    category_flags,
    comm_kernel_mask,
    comm_op_mask,
    event_ends,
    is_dataloader_name,
    kind_mask,
    name_mask,
)
from .memo import memoised
from .steps import STEP_PREFIX, Steps, compute_steps

KERNEL = "Kernel"
MEMCPY = "Memcpy"
MEMSET = "Memset"
COMMUNICATION = "Communication"
RUNTIME = "Runtime"
DATALOADER = "DataLoader"
CPU_EXEC = "CPU Exec"
OTHER = "Other"
#: Roles in priority order; "Other" is what none of them covers.
ROLE_PRIORITY = (KERNEL, MEMCPY, MEMSET, COMMUNICATION, RUNTIME, DATALOADER, CPU_EXEC)
CATEGORIES = (*ROLE_PRIORITY, OTHER)
GPU_CATEGORIES = (KERNEL, MEMCPY, MEMSET, RUNTIME)

@dataclass
class Breakdown:
    """Per-step costs (us) by category, aligned with `steps`; `average` also has "Total"."""

    steps: Steps
    costs: dict[str, np.ndarray]
    totals: np.ndarray
    has_gpu: bool
    has_communication: bool

    @property
    def average(self) -> dict[str, float]:
        if len(self.steps) == 0:
            return {"Total": 0.0, **{c: 0.0 for c in CATEGORIES}}
        result = {"Total": float(self.totals.mean())}
        result.update({c: float(self.costs[c].mean()) for c in CATEGORIES})
        return result

    def shown_categories(self) -> list[str]:
        """Categories worth showing: GPU ones with GPU work, Communication only when seen."""
        shown = []
        for category in CATEGORIES:
            if category in GPU_CATEGORIES and not self.has_gpu:
                continue
            if category == COMMUNICATION and not self.has_communication:
                continue
            shown.append(category)
        return shown


def role_ranges(table: TraceTable) -> dict[str, rg.Ranges]:
    """Merged busy ranges of each role over the whole trace (before priority), computed once."""
    return memoised(table, "role_ranges", lambda: _role_ranges(table.events))


def _role_ranges(events: pd.DataFrame) -> dict[str, rg.Ranges]:
    starts, ends = events["ts"].to_numpy(), event_ends(events)
    comm_kernels = comm_kernel_mask(events)
    host = kind_mask(events, HOST_KINDS) & ~name_mask(events, lambda n: n.str.startswith(
        STEP_PREFIX))
    comm_ops = host & comm_op_mask(events)
    loaders = host & ~comm_ops & category_flags(events["name"], is_dataloader_name)
    masks = {
        KERNEL: kind_mask(events, (Kind.KERNEL,)) & ~comm_kernels,
        MEMCPY: kind_mask(events, (Kind.MEMCPY,)),
        MEMSET: kind_mask(events, (Kind.MEMSET,)),
        COMMUNICATION: comm_ops | comm_kernels,
        RUNTIME: kind_mask(events, (Kind.RUNTIME, Kind.DRIVER)),
        DATALOADER: loaders,
        CPU_EXEC: host & ~comm_ops & ~loaders,
    }
    return {role: rg.merge(starts[mask], ends[mask]) for role, mask in masks.items()}


def compute_breakdown(table: TraceTable) -> Breakdown:
    """The step-time breakdown of a table, computed once."""
    return memoised(table, "breakdown", lambda: _compute_breakdown(table))


def _compute_breakdown(table: TraceTable) -> Breakdown:
    steps = compute_steps(table)
    roles = role_ranges(table)
    costs = assign_by_priority(roles, steps.starts, steps.ends)
    kinds = table.events["kind"].to_numpy()
    gpu_kinds = np.asarray((Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.RUNTIME, Kind.DRIVER))
    return Breakdown(
        steps=steps,
        costs=costs,
        totals=steps.ends - steps.starts,
        has_gpu=bool(np.isin(kinds, gpu_kinds).any()),
        has_communication=roles[COMMUNICATION][0].size > 0,
    )


def assign_by_priority(roles: dict[str, rg.Ranges], starts: np.ndarray, ends: np.ndarray
                       ) -> dict[str, np.ndarray]:
    """Per-window cost of each role (and "Other") when higher roles take time first.

    Always intersects with the time still free, so a window's costs sum to its length.
    """
    free = rg.merge(starts, ends)
    costs: dict[str, np.ndarray] = {}
    for role in ROLE_PRIORITY:
        taken = rg.intersect(roles.get(role, rg.empty()), free)
        costs[role] = rg.length_in_windows(taken, starts, ends)
        free = rg.subtract(free, taken)
    costs[OTHER] = rg.length_in_windows(free, starts, ends)
    return costs
