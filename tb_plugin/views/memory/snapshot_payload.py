"""`/memory/snapshot` (`analysis.memory.snapshot.build_memory_snapshot`): an allocator snapshot
(`torch.cuda.memory._dump_snapshot` pickle) of the run. Times (`t`, `start`, `end`, `at`) are in
the payload's `clock`: trace us, the snapshot's own us (epoch), or entry numbers; sizes bytes;
addresses are the device's virtual addresses."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc


class SnapshotCurve(TypedDict):
    """Allocated and reserved bytes after each entry (step points, down-sampled so the peak
    survives), anchored at the dump so memory from before the trace counts."""

    t: Annotated[list[float], doc("Times, in `clock` units (3 decimals).")]
    allocated: Annotated[list[int], doc("Allocated bytes (alloc to free_completed).")]
    reserved: Annotated[list[int], doc("Reserved bytes (the allocator's segments).")]


class SnapshotPeak(TypedDict):
    bytes: Annotated[int, doc("Peak allocated bytes.")]
    t: Annotated[Optional[float], doc("When, in `clock` units; null without entries.")]
    reserved_bytes: Annotated[int, doc("Peak reserved bytes.")]


class SnapshotBlock(TypedDict):
    """One live allocation inside a segment."""

    offset: Annotated[int, doc("From the segment's start, bytes.")]
    size: Annotated[int, doc("Bytes.")]
    frame: Annotated[Optional[str], doc("Its first frame outside torch, `name (file:line)`; "
                                        "null without a stack.")]


class SnapshotSegment(TypedDict):
    """One allocator segment (cudaMalloc'd memory) and what is live in it."""

    address: Annotated[int, doc("Start address.")]
    size: Annotated[int, doc("Bytes.")]
    allocated_bytes: Annotated[int, doc("Bytes in live blocks.")]
    largest_free_bytes: Annotated[int, doc("Largest run of bytes no live block covers.")]
    blocks: Annotated[list[SnapshotBlock], doc("Live blocks in address order.")]


class SnapshotSegments(TypedDict):
    """The segments and blocks at one instant (fragmentation: free bytes that no single request
    can use are free_bytes - largest_free_bytes)."""

    position: Annotated[int, doc("The entry the state is after (-1: before the first).")]
    at: Annotated[Optional[float], doc("Its time, in `clock` units; null before the first.")]
    reserved_bytes: Annotated[int, doc("Bytes in all live segments.")]
    allocated_bytes: Annotated[int, doc("Bytes in live blocks.")]
    free_bytes: Annotated[int, doc("reserved_bytes - allocated_bytes.")]
    largest_free_bytes: Annotated[int, doc("The largest request served without a new "
                                           "segment.")]
    segment_count: Annotated[int, doc("Live segments.")]
    block_count: Annotated[int, doc("Live blocks.")]
    truncated: Annotated[bool, doc("Only the largest segments (400) and blocks (4000) are "
                                   "listed.")]
    rows: Annotated[list[SnapshotSegment], doc("Segments in address order.")]


class SnapshotFrame(TypedDict):
    filename: Annotated[str, doc("Source file.")]
    line: Annotated[int, doc("Line number (0 for native frames).")]
    name: Annotated[str, doc("Function.")]


class SnapshotAllocation(TypedDict):
    """A live allocation at the peak, with where it was allocated."""

    address: Annotated[int, doc("Address.")]
    size: Annotated[int, doc("Bytes.")]
    alloc_t: Annotated[Optional[float], doc("Allocated at, `clock` units; null when before "
                                            "the trace.")]
    free_t: Annotated[Optional[float], doc("Freed (free_completed) at; null when still "
                                           "allocated at the dump.")]
    frames: Annotated[list[SnapshotFrame], doc("Allocation stack, innermost first (at most 64 "
                                               "frames); empty when not recorded.")]


class SnapshotOom(TypedDict):
    t: Annotated[Optional[float], doc("When, `clock` units.")]
    bytes: Annotated[int, doc("The request that failed, bytes.")]
    device_free: Annotated[Optional[int], doc("Free device memory the driver reported, bytes.")]


class SnapshotStep(TypedDict):
    name: Annotated[str, doc("Profiler step name.")]
    start: Annotated[Optional[float], doc("Host start, trace us.")]
    end: Annotated[Optional[float], doc("Host end, trace us.")]


class MemorySnapshotPayload(TypedDict):
    """`/memory/snapshot`: one allocator snapshot, one device."""

    name: Annotated[str, doc("The snapshot file's name.")]
    snapshots: Annotated[list[str], doc("Every snapshot file of the run (for `snapshot=`).")]
    devices: Annotated[list[str], doc("Devices in the snapshot (`GPU<i>`).")]
    device: Annotated[Optional[str], doc("The device shown; null for an empty snapshot.")]
    clock: Annotated[Literal["trace", "snapshot", "entry"], doc(
        "`trace`: trace us, the clock of `/memory` (the snapshot overlaps the span's trace); "
        "`snapshot`: the snapshot's own us; `entry`: entry numbers (no times recorded).")]
    base_time_ns: Annotated[Optional[int], doc("The trace's baseTimeNanoseconds used for "
                                               "`trace`; null otherwise.")]
    range: Annotated[list[Optional[float]], doc("[start, end] as requested; null for an open "
                                                "end.")]
    extent: Annotated[list[Optional[float]], doc("[first, last] entry time.")]
    entries: Annotated[int, doc("Trace entries of the device.")]
    curve: Annotated[SnapshotCurve, doc("Allocated/reserved over the range.")]
    peak: Annotated[SnapshotPeak, doc("Over the whole trace.")]
    segments: Annotated[SnapshotSegments, doc("At `at` (default the peak).")]
    top_allocations: Annotated[list[SnapshotAllocation], doc("The largest allocations live at "
                                                             "the peak, largest first (20).")]
    ooms: Annotated[list[SnapshotOom], doc("Out-of-memory events (at most 100).")]
    steps: Annotated[list[SnapshotStep], doc("The trace's profiler steps (clock `trace` only).")]
    skipped: Annotated[int, doc("Malformed records skipped.")]
    messages: Annotated[list[str], doc("Caveats.")]
