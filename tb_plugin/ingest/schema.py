"""The columnar form of one trace file: what the parser produces and every analysis reads.

One `TraceTable` per worker file. The core `events` table has one row per duration/instant/counter
event with interned (categorical) strings; arguments that only some event kinds carry live in
sparse side tables keyed by `event` (the row number in `events`), so an 800 MB trace costs a few
bytes per event per column instead of a Python dict per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable

import pandas as pd

#: Bumped whenever the parser's output changes; part of every cache key.
PARSER_VERSION = 5  # 2: categories in order of first appearance, batch-independent
# 3: op_args gained concrete_inputs, flops and the Inductor kernel columns
#    (kernel_file, kernel_hash, kernel_backend, kernel_flop, kernel_num_gb)
# 4: strings over 1 Mi characters are cut (interning.MAX_STRING_CHARS)
# 5: op_args gained seq (record_param_comms "Seq")


#: Largest |ts| (and duration) read, in microseconds (about 3,170 years): the clock of any real
#: trace (microseconds since the epoch, ~1.7e15) fits with room to spare; an event beyond it
#: (`"ts": 1e308`) is skipped like one without a time, and request windows are bounded by it.
MAX_TIME_US = 1e17


class Kind(IntEnum):
    """What an event is, derived from its `cat` (case-insensitive), PyTorch 1.x and 2.x."""

    OTHER = 0
    CPU_OP = 1
    USER_ANNOTATION = 2
    GPU_USER_ANNOTATION = 3
    RUNTIME = 4
    DRIVER = 5
    KERNEL = 6
    MEMCPY = 7
    MEMSET = 8
    PYTHON_FUNCTION = 9
    PYTHON = 10
    TRACE = 11
    SYNC = 12
    OVERHEAD = 13


CATEGORY_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "gpu_user_annotation": Kind.GPU_USER_ANNOTATION,
    "runtime": Kind.RUNTIME,
    "cuda_runtime": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "glow_runtime": Kind.RUNTIME,
    "xpu_runtime": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "hip_driver": Kind.DRIVER,
    "xpu_driver": Kind.DRIVER,
    "privateuse1_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL,
    "memcpy": Kind.MEMCPY,
    "gpu_memcpy": Kind.MEMCPY,
    "memset": Kind.MEMSET,
    "gpu_memset": Kind.MEMSET,
    "python_function": Kind.PYTHON_FUNCTION,
    "python": Kind.PYTHON,
    "trace": Kind.TRACE,
    "cuda_sync": Kind.SYNC,
    "overhead": Kind.OVERHEAD,
}

DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)


class LoadState:
    """Per-worker load outcome, shown to the user next to the worker."""

    OK = "ok"  # everything parsed
    PARTIAL = "partial"  # parsed, but some events were malformed and skipped
    TRUNCATED = "truncated"  # the file ends mid-write; complete events before the cut are kept
    ERROR = "error"  # nothing usable


_STATE_ORDER = [LoadState.OK, LoadState.PARTIAL, LoadState.TRUNCATED, LoadState.ERROR]


@dataclass
class ParseStatus:
    state: str = LoadState.OK
    messages: list[str] = field(default_factory=list)
    skipped_events: int = 0
    bytes_read: int = 0
    #: The file stops inside a JSON value (empty, or a valid prefix cut off mid-token): it may
    #: still be being written. False for a file that ends in invalid JSON: that is final.
    cut_off: bool = False

    def warn(self, state: str, message: str) -> None:
        """Record a problem; the worst state wins (error > truncated > partial > ok)."""
        self.raise_to(state)
        if message not in self.messages:
            self.messages.append(message)

    def raise_to(self, state: str) -> None:
        """Make the state at least `state`, without a message."""
        if _STATE_ORDER.index(state) > _STATE_ORDER.index(self.state):
            self.state = state

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "messages": list(self.messages),
            "skipped_events": self.skipped_events,
            "bytes_read": self.bytes_read,
            "cut_off": self.cut_off,
        }


#: Column layout of each table (name -> numpy dtype, or "category" for interned strings).
#: Numeric arguments are float64 with NaN for "absent" so that one missing or odd value never
#: costs the whole column (ids, addresses and byte counts all stay below 2**53).
EVENT_COLUMNS: dict[str, str] = {
    "ts": "float64",  # us, as written in the file
    "dur": "float64",  # us; NaN for instants and counters, clamped to >= 0
    "ph": "category",
    "cat": "category",
    "kind": "int8",  # Kind
    "name": "category",
    "pid": "category",  # strings: "1102", "Spans", "0" (GPU index)...
    "tid": "category",  # strings: "1102", "stream 7", "7"...
    "external_id": "float64",
    "correlation": "float64",
}
DEVICE_ARG_COLUMNS: dict[str, str] = {  # kernels, memcpy, memset (and launches' device args)
    "event": "int64",
    "device": "float64",
    "stream": "float64",
    "grid": "category",  # "[4, 106, 1]"
    "block": "category",
    "registers_per_thread": "float64",
    "shared_memory": "float64",
    "blocks_per_sm": "float64",
    "warps_per_sm": "float64",
    "occupancy": "float64",  # est. achieved occupancy %
    "bytes": "float64",
    "bandwidth_gbps": "float64",
}
OP_ARG_COLUMNS: dict[str, str] = {  # cpu_op / user annotations
    "event": "int64",
    "input_dims": "category",  # Python str() of the dims list, as the reference shows it
    "input_types": "category",
    "concrete_inputs": "category",  # scalar arguments as recorded; kept for convolutions only
    "call_stack": "category",
    "sequence_number": "float64",
    "fwd_thread_id": "float64",
    "collective": "category",  # record_param_comms "Collective name"
    "in_msg_nelems": "float64",
    "out_msg_nelems": "float64",
    "group_size": "float64",
    "dtype": "category",
    "process_group": "category",
    "seq": "float64",  # record_param_comms "Seq": the collective's number in its group
    "flops": "float64",  # `flops` arg (with_flops=True), FLOPs of one call
    "kernel_file": "category",  # Inductor kernel ops: generated source file
    "kernel_hash": "category",
    "kernel_backend": "category",  # "triton", "cpp"...
    "kernel_flop": "float64",  # Inductor's own FLOP estimate of the kernel
    "kernel_num_gb": "float64",  # Inductor's own estimate of the GB it moves
}
PYTHON_ARG_COLUMNS: dict[str, str] = {
    "event": "int64",
    "python_id": "float64",
    "python_parent_id": "float64",
    "python_module_id": "float64",
}
MEMORY_COLUMNS: dict[str, str] = {  # "[memory]" instant events
    "ts": "float64",
    "pid": "category",
    "tid": "category",
    "device_type": "float64",
    "device_id": "float64",
    "addr": "float64",
    "bytes": "float64",
    "total_allocated": "float64",
    "total_reserved": "float64",
}
FLOW_COLUMNS: dict[str, str] = {  # s/f/t flow events: ac2g launch links, fwdbwd, legacy async
    "ts": "float64",
    "ph": "category",
    "cat": "category",
    "pid": "category",
    "tid": "category",
    "id": "float64",
    "binding": "category",  # "e" = enclosing slice
}

TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "events": EVENT_COLUMNS,
    "device_args": DEVICE_ARG_COLUMNS,
    "op_args": OP_ARG_COLUMNS,
    "python_args": PYTHON_ARG_COLUMNS,
    "memory": MEMORY_COLUMNS,
    "flows": FLOW_COLUMNS,
}


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            name: pd.Categorical([]) if dtype == "category" else pd.Series([], dtype=dtype)
            for name, dtype in columns.items()
        }
    )


@dataclass
class TraceMetadata:
    """Top-level fields of the trace document and `M` (process/thread naming) events."""

    schema_version: Any = None
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed_info: dict[str, Any] | None = None
    base_time_ns: int | None = None
    framework: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other small top-level keys
    #: `M` events as (name, pid, tid, args) dicts: process_name, thread_name, sort indices...
    process_metadata: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "device_properties": self.device_properties,
            "distributed_info": self.distributed_info,
            "base_time_ns": self.base_time_ns,
            "framework": self.framework,
            "extra": self.extra,
            "process_metadata": self.process_metadata,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TraceMetadata:
        return cls(**data)


@dataclass
class TraceTable:
    """Everything parsed from one worker's trace file."""

    events: pd.DataFrame
    device_args: pd.DataFrame
    op_args: pd.DataFrame
    python_args: pd.DataFrame
    memory: pd.DataFrame
    flows: pd.DataFrame
    metadata: TraceMetadata
    status: ParseStatus
    #: Derived analyses (op tree, steps...) computed once per table and shared by all views.
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """The value of `compute()` for this table, computed on first use only (analysis
        stages go through `analysis.memo.memoised`, which also trims the heap)."""
        if key not in self.derived:
            self.derived[key] = compute()
        return self.derived[key]

    def __len__(self) -> int:
        return len(self.events)

    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: getattr(self, name) for name in TABLE_COLUMNS}

    @property
    def event_count(self) -> int:
        """All events kept, side tables included (memory instants and flows)."""
        return len(self.events) + len(self.memory) + len(self.flows)
