"""`/memory` (`analysis.memory.view.build_memory`): memory curves, peaks, allocation/free pairs,
per-operator statistics and leak hints of one trace's `[memory]` records. Devices are labels
such as "CPU", "GPU0"; times are absolute trace us; sizes bytes."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc


class MemoryCurve(TypedDict):
    """Allocated and reserved memory of one device over time (step points, down-sampled)."""

    t_us: Annotated[list[Optional[float]], doc("Times, trace us (3 decimals).")]
    allocated: Annotated[list[Optional[float]], doc("Allocated bytes at each time.")]
    reserved: Annotated[list[Optional[float]], doc("Reserved bytes at each time; null where "
                                                   "the allocator keeps no reserved pool (CPU) "
                                                   "or the trace has no reserved total.")]
    approximate: Annotated[bool, doc("Rebuilt from allocation sizes (no totals in the trace, "
                                     "PyTorch < 1.10): starts at zero.")]


class MemoryPeak(TypedDict):
    """Peak allocated memory of one device."""

    bytes: Annotated[int, doc("Peak allocated bytes.")]
    t_us: Annotated[Optional[float], doc("When it happened, trace us.")]
    reserved_bytes: Annotated[Optional[int], doc("Peak reserved bytes; null without a reserved "
                                                 "pool (CPU) or when unknown.")]
    capacity_bytes: Annotated[Optional[int], doc("Device memory (CUDA devices with known "
                                                 "properties); null otherwise.")]
    fraction_of_capacity: Annotated[Optional[float], doc("bytes / capacity_bytes (4 decimals); "
                                                         "null without a capacity.")]
    approximate: Annotated[bool, doc("As in the curves.")]
    end_bytes: Annotated[int, doc("Still allocated at the end of the window (or trace), bytes: "
                                  "everything alive then, including memory allocated before "
                                  "profiling started; not a leak by itself.")]


class MemoryEventRow(TypedDict):
    """One allocation with its release (either side may be missing)."""

    device: Annotated[str, doc("Device label.")]
    op: Annotated[str, doc('The allocating operator ("<unknown>" for a release without '
                           "allocation or outside any operator).")]
    bytes: Annotated[int, doc("Size, bytes.")]
    alloc_t_us: Annotated[Optional[float], doc("Allocation time, trace us; null when the "
                                               "allocation is before the trace.")]
    free_t_us: Annotated[Optional[float], doc("Release time, trace us; null while still "
                                              "allocated.")]
    duration_us: Annotated[Optional[float], doc("free - alloc, us; null when either is "
                                                "missing.")]


class MemoryEvents(TypedDict):
    rows: Annotated[list[MemoryEventRow], doc("Pairs in time order (the largest when capped).")]
    total: Annotated[int, doc("Pairs in the range.")]
    truncated: Annotated[bool, doc("len(rows) < total.")]


class MemoryOperatorRow(TypedDict):
    """Memory statistics of one operator name on one device."""

    device: Annotated[str, doc("Device label.")]
    name: Annotated[str, doc("Operator name.")]
    calls: Annotated[int, doc("Calls that allocated or released on the device.")]
    self_increase_bytes: Annotated[int, doc("Allocated minus released by the op itself, bytes.")]
    self_alloc_bytes: Annotated[int, doc("Allocated by the op itself, bytes.")]
    self_alloc_count: Annotated[int, doc("Allocations by the op itself.")]
    increase_bytes: Annotated[int, doc("Allocated minus released including children, bytes.")]
    alloc_bytes: Annotated[int, doc("Allocated including children, bytes.")]
    alloc_count: Annotated[int, doc("Allocations including children.")]


class MemoryOperators(TypedDict):
    rows: Annotated[list[MemoryOperatorRow], doc("One row per (device, operator).")]


class LeakOp(TypedDict):
    name: Annotated[str, doc("Allocating operator.")]
    count: Annotated[int, doc("Its allocations made after the first step end and still live "
                              "at the end of the window.")]
    bytes: Annotated[int, doc("Their bytes.")]


class MemoryLeak(TypedDict):
    """A growth flag: the allocated level at every profiler step end rose above the noise, by
    at least 1 MiB in all, over at least 3 steps (`analysis.memory.leaks`). Memory that is only
    alive at the end of the window is never flagged."""

    device: Annotated[str, doc("Device label.")]
    kind: Annotated[Literal["growth"], doc("The check that fired.")]
    steps: Annotated[list[str], doc("Step names.")]
    allocated_at_step_end: Annotated[list[int], doc("Allocated bytes at each step end.")]
    growth_bytes: Annotated[int, doc("Last minus first, bytes.")]
    per_step_bytes: Annotated[int, doc("Mean growth per step, bytes.")]
    noise_bytes: Annotated[int, doc("Each rise exceeded this, bytes: max(16 KiB, 0.5% of the "
                                    "highest step-end level).")]
    approximate: Annotated[bool, doc("The curve is approximate.")]
    top_ops: Annotated[list[LeakOp], doc("The operators allocating what stays, most bytes "
                                         "first.")]


class MemoryPayload(TypedDict):
    """`/memory`: the memory view of one worker span (optionally one device, one range)."""

    devices: Annotated[list[str], doc("Every device with memory records.")]
    default_device: Annotated[Optional[str], doc("The device to show first (the first GPU, "
                                                 "else CPU); null without records.")]
    time_origin_us: Annotated[Optional[float], doc("Profiler start (earliest event or record), "
                                                   "trace us, for relative axes.")]
    range_us: Annotated[list[Optional[float]], doc("[start_us, end_us] as requested; null "
                                                   "for an open end.")]
    curves: Annotated[dict[str, MemoryCurve], doc("Per shown device.")]
    peaks: Annotated[dict[str, MemoryPeak], doc("Per shown device with records.")]
    events: Annotated[MemoryEvents, doc("Allocation/free pairs in the range.")]
    operators: Annotated[MemoryOperators, doc("Per-operator statistics in the range.")]
    leaks: Annotated[list[MemoryLeak], doc("Growth flags per shown device.")]
    messages: Annotated[list[str], doc("Caveats about the records.")]
