"""Step-time breakdown: each microsecond of a step goes to the highest-priority role busy then.

Priority (spec 3.6): Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec >
Other. Role ranges are merged unions over the whole trace; one global pass over the union of all
steps assigns time role by role, and per-step costs are read off with prefix sums. Unlike the
reference, every role is intersected with what is left (its "slot reset" bug let a role count
time a higher role already took), so the categories of a step always sum to its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from . import ranges as rg
from .steps import STEP_PREFIX, Steps, compute_steps, event_ends, kind_mask, name_mask

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

#: Host-side kinds that can be operators, comm ops or data loading (the GPU-side mirror
#: `gpu_user_annotation` is device time, not CPU work, so it is never CPU Exec).
HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)

_COLLECTIVE = (r"(?:all_?reduce|all_?gather|reduce_?scatter|broadcast|reduce|all_?to_?all"
               r"|gather|scatter|send|recv|barrier|coalesced)")
_COMM_NAME = re.compile(
    r"record_param_comms$"
    r"|(?:nccl|rccl|gloo|mpi|ucc|xccl|hccl):\S"  # backend-prefixed ops: nccl:all_to_all, gloo:...
    rf"|(?:c10d|_c10d_functional|c10d_functional)::_?{_COLLECTIVE}\w*$"  # c10d::allreduce_
    r"|_?(?:all_?gather|reduce_?scatter)_base_?$"  # ProcessGroup._allgather_base
)
#: NCCL/RCCL device kernels: ncclKernel_AllReduce_..., ncclDevKernel_..., ncclAllReduceRing..Kernel
_NCCL_KERNEL = re.compile(r"nccl\w*Kernel")
_DATALOADER = re.compile(r"enumerate\(DataLoader\)#.*\.__next__$|enumerate\(DataPipe\)#")


def is_comm_op_name(name: str) -> bool:
    """Whether a host op/annotation name is a collective or point-to-point communication op.

    Covers the reference's `nccl:`/`gloo:` collectives and PyTorch 2.x names
    (`record_param_comms`, `c10d::*` collectives, all_to_all, send/recv, `_allgather_base`,
    `_reduce_scatter_base`, coalesced ops).
    """
    return bool(_COMM_NAME.match(name))


def is_nccl_kernel_name(name: str) -> bool:
    return bool(_NCCL_KERNEL.match(name))


def is_dataloader_name(name: str) -> bool:
    return bool(_DATALOADER.match(name))


def _names_matching(pattern: re.Pattern[str]) -> Callable[[pd.Index], np.ndarray]:
    return lambda names: names.str.match(pattern.pattern)


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


def comm_op_mask(events: pd.DataFrame) -> np.ndarray:
    """Host events that are communication ops."""
    return kind_mask(events, HOST_KINDS) & name_mask(events, _names_matching(_COMM_NAME))


def comm_kernel_mask(events: pd.DataFrame) -> np.ndarray:
    """Kernels doing communication: NCCL by name, or launched under a (non-Gloo) comm op."""
    kernels = kind_mask(events, (Kind.KERNEL,))
    by_name = kernels & name_mask(events, _names_matching(_NCCL_KERNEL))
    comm_ops = comm_op_mask(events) & ~name_mask(events, lambda n: n.str.startswith("gloo:"))
    external = events["external_id"].to_numpy()
    comm_ids = external[comm_ops]
    comm_ids = comm_ids[np.isfinite(comm_ids) & (comm_ids != 0)]
    by_id = kernels & np.isin(external, comm_ids)
    return by_name | by_id


def role_ranges(table: TraceTable) -> dict[str, rg.Ranges]:
    """Merged busy ranges of each role over the whole trace (before priority), computed once."""
    return table.memo("role_ranges", lambda: _role_ranges(table.events))


def _role_ranges(events: pd.DataFrame) -> dict[str, rg.Ranges]:
    starts, ends = events["ts"].to_numpy(), event_ends(events)
    comm_kernels = comm_kernel_mask(events)
    host = kind_mask(events, HOST_KINDS) & ~name_mask(events, lambda n: n.str.startswith(
        STEP_PREFIX))
    comm_ops = host & comm_op_mask(events)
    loaders = host & ~comm_ops & name_mask(events, _names_matching(_DATALOADER))
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
    return table.memo("breakdown", lambda: _compute_breakdown(table))


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
