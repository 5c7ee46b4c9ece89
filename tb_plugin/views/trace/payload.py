"""`/timeline`, `/timeline/event`, `/timeline/search` (`analysis.timeline.view`).

Times inside a `/timeline` window are relative: us since `origin_us` (the window start), rounded
to about 1/20 pixel, integers when that is a whole microsecond. Columns are parallel arrays
(struct of arrays) to keep big windows small.
"""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import doc

_REL = "us since origin_us"

EventKind = Literal["other", "cpu_op", "user_annotation", "gpu_user_annotation", "runtime",
                    "driver", "kernel", "memcpy", "memset", "python_function", "python",
                    "trace", "sync", "overhead"]
"""What an event is, from its category (`ingest.schema.Kind`, lower case)."""


class RowEvents(TypedDict):
    """Events drawn one by one, as parallel arrays."""

    name: Annotated[list[int], doc("Index into the payload's `names`.")]
    start: Annotated[list[float], doc(f"Start, {_REL}.")]
    dur: Annotated[list[float], doc("Duration, us.")]
    id: Annotated[list[int], doc("Event id (for `/timeline/event?id=`).")]
    path: NotRequired[Annotated[list[int], doc(
        "Only with `critical_step`: indices (into these lists) of the events on the step's "
        "critical path.")]]


class RowBlocks(TypedDict):
    """Runs of events too small to draw one by one, merged into blocks (parallel arrays)."""

    start: Annotated[list[float], doc(f"Block start, {_REL}.")]
    end: Annotated[list[float], doc(f"Block end, {_REL}.")]
    count: Annotated[list[int], doc("Events merged into the block.")]
    path: NotRequired[Annotated[list[int], doc(
        "Only with `critical_step`: indices of the blocks that hold critical-path events.")]]


class TrackRow(TypedDict):
    """One visible nesting level of a track."""

    depth: Annotated[int, doc("Nesting depth within the track (0: top level).")]
    events: Annotated[RowEvents, doc("Events drawn individually.")]
    blocks: Annotated[RowBlocks, doc("Merged blocks.")]


class Track(TypedDict):
    """One (process, thread) lane of the trace, in display order."""

    pid: Annotated[str, doc("The trace's pid, as a string.")]
    tid: Annotated[str, doc("The trace's tid, as a string.")]
    kind: Annotated[Literal["cpu", "gpu", "other"], doc("Track group.")]
    process: Annotated[str, doc("Process label to display.")]
    thread: Annotated[str, doc("Thread (or stream) label to display.")]
    id: Annotated[int, doc("Track index (used by flows, events and search results).")]
    depth: Annotated[int, doc("Number of nesting levels of the whole track.")]
    event_count: Annotated[int, doc("Events on the track over the whole trace.")]
    rows: Annotated[list[TrackRow], doc("Only the levels with something in the window.")]


class TimelineSteps(TypedDict):
    """Profiler steps overlapping the window (parallel arrays)."""

    total: Annotated[int, doc("Steps overlapping the window.")]
    capped: Annotated[bool, doc("More than 4000: an even sample is sent.")]
    name: Annotated[list[str], doc("Step names.")]
    start: Annotated[list[float], doc(f"Step start, {_REL}.")]
    end: Annotated[list[float], doc(f"Step end, {_REL}.")]


class TimelineFlows(TypedDict):
    """Flow arrows (start -> finish) with an end in the window (parallel arrays)."""

    total: Annotated[int, doc("Flows with an end in the window.")]
    capped: Annotated[bool, doc("More than `limit`: an even sample is sent.")]
    limit: Annotated[int, doc("Most flows sent.")]
    crossing: Annotated[int, doc("Flows that only pass over the window (counted, not sent).")]
    cats: Annotated[list[str], doc('Flow categories (e.g. "ac2g", "fwdbwd"), indexed by `cat`.')]
    cat: Annotated[list[int], doc("Index into `cats`.")]
    from_track: Annotated[list[int], doc("Track id of the start.")]
    from_depth: Annotated[list[int], doc("Depth of the start event (0 when not placed).")]
    from_ts: Annotated[list[float], doc(f"Start time, {_REL}.")]
    from_id: Annotated[list[int], doc("Event id of the start, -1 when not placed.")]
    to_track: Annotated[list[int], doc("Track id of the end.")]
    to_depth: Annotated[list[int], doc("Depth of the end event (0 when not placed).")]
    to_ts: Annotated[list[float], doc(f"End time, {_REL}.")]
    to_id: Annotated[list[int], doc("Event id of the end, -1 when not placed.")]


class CriticalEdges(TypedDict):
    """Edges of the critical path touching the window, in path order (parallel arrays): from
    the end of the predecessor to where it bound the next node (the later of that node's
    start and the predecessor's end)."""

    total: Annotated[int, doc("Path edges touching the window.")]
    capped: Annotated[bool, doc("More than 2000: an even sample is sent.")]
    kinds: Annotated[list[str], doc('Edge kinds ("host_order", "stream", "launch", '
                                    '"blocking", "sync"), indexed by `kind`.')]
    kind: Annotated[list[int], doc("Index into `kinds`.")]
    from_track: Annotated[list[int], doc("Track id of the predecessor, -1 when not drawn.")]
    from_depth: Annotated[list[int], doc("Depth of the predecessor.")]
    from_ts: Annotated[list[float], doc(f"End of the predecessor, {_REL}.")]
    from_id: Annotated[list[int], doc("Event id of the predecessor.")]
    to_track: Annotated[list[int], doc("Track id of the node, -1 when not drawn.")]
    to_depth: Annotated[list[int], doc("Depth of the node.")]
    to_ts: Annotated[list[float], doc(f"Where the edge meets the node, {_REL}.")]
    to_id: Annotated[list[int], doc("Event id of the node.")]


class TimelineCritical(TypedDict):
    """The critical path of one step (`critical_step`), as in the GPU Idle view."""

    step: Annotated[str, doc("The step's name.")]
    start_us: Annotated[float, doc("Step start, trace us (absolute).")]
    end_us: Annotated[float, doc("Step end, trace us (absolute).")]
    nodes: Annotated[int, doc("Events on the path (0: the step has no host call or device "
                              "event).")]
    edges: Annotated[CriticalEdges, doc("The path's edges touching the window.")]


class CounterTrack(TypedDict):
    """One counter series (GPU utilization, SM efficiency, memory), sampled per pixel bin."""

    name: Annotated[str, doc('Display name, e.g. "GPU 0 Utilization".')]
    kind: Annotated[Literal["gpu_utilization", "sm_efficiency", "memory_allocated",
                            "memory_reserved"], doc("What is measured.")]
    device: Annotated[str, doc('Device label, e.g. "GPU 0", "CPU".')]
    unit: Annotated[Literal["fraction", "bytes"], doc("Unit of `v`.")]
    t: Annotated[list[float], doc(f"Sample times, {_REL}.")]
    v: Annotated[list[float], doc("Values: fractions 0..1 (4 decimals) or whole bytes.")]


class TimelineStats(TypedDict):
    events: Annotated[int, doc("Events in the window.")]
    shown: Annotated[int, doc("Events drawn individually.")]
    blocks: Annotated[int, doc("Merged blocks.")]
    hidden: Annotated[int, doc("Events inside blocks.")]


class TimelinePayload(TypedDict):
    """`/timeline`: one window of the trace at a pixel width, level of detail applied."""

    view: Annotated[Literal["timeline"], doc("Always \"timeline\".")]
    start_us: Annotated[float, doc("Window start, trace us (absolute).")]
    end_us: Annotated[float, doc("Window end, trace us (absolute).")]
    width: Annotated[int, doc("Width in pixels the window was laid out for.")]
    us_per_px: Annotated[float, doc("Microseconds per pixel.")]
    origin_us: Annotated[float, doc("Absolute trace us that relative times count from (= "
                                    "start_us).")]
    trace_start_us: Annotated[float, doc("First event of the trace, absolute us.")]
    trace_end_us: Annotated[float, doc("Last event end of the trace, absolute us.")]
    merge_px: Annotated[float, doc("Pixels below which neighbouring events merge into blocks "
                                   "(doubled on dense windows).")]
    names: Annotated[list[str], doc("Event names, indexed by `events.name`.")]
    tracks: Annotated[list[Track], doc("All tracks, in display order.")]
    steps: Annotated[TimelineSteps, doc("Profiler steps in the window.")]
    flows: Annotated[TimelineFlows, doc("Flow arrows in the window.")]
    counters: Annotated[list[CounterTrack], doc("Counter tracks.")]
    stats: Annotated[TimelineStats, doc("Level-of-detail statistics.")]
    critical: NotRequired[Annotated[TimelineCritical, doc(
        "Only with `critical_step`: that step's critical path; its events are listed in each "
        "row's `events.path` / `blocks.path`.")]]


# -- /timeline/event ------------------------------------------------------------------------------

_ABSENT = "; absent when the event has none."


class DeviceArgs(TypedDict):
    """Kernel/memcpy/memset (and launch) arguments present on the event."""

    device: NotRequired[Annotated[float, doc("Device index" + _ABSENT)]]
    stream: NotRequired[Annotated[float, doc("Stream" + _ABSENT)]]
    grid: NotRequired[Annotated[str, doc('Grid, e.g. "[4, 106, 1]"' + _ABSENT)]]
    block: NotRequired[Annotated[str, doc("Block" + _ABSENT)]]
    registers_per_thread: NotRequired[Annotated[float, doc("Registers per thread" + _ABSENT)]]
    shared_memory: NotRequired[Annotated[float, doc("Shared memory, bytes" + _ABSENT)]]
    blocks_per_sm: NotRequired[Annotated[float, doc("Blocks per SM" + _ABSENT)]]
    warps_per_sm: NotRequired[Annotated[float, doc("Warps per SM" + _ABSENT)]]
    occupancy: NotRequired[Annotated[float, doc("Estimated achieved occupancy, percent"
                                                + _ABSENT)]]
    bytes: NotRequired[Annotated[float, doc("Bytes copied or set" + _ABSENT)]]
    bandwidth_gbps: NotRequired[Annotated[float, doc("Copy bandwidth, GB/s" + _ABSENT)]]


class OpArgs(TypedDict):
    """Operator (cpu_op, user annotation) arguments present on the event."""

    input_dims: NotRequired[Annotated[str, doc("Input dims, Python str of the list" + _ABSENT)]]
    input_types: NotRequired[Annotated[str, doc("Input types" + _ABSENT)]]
    call_stack: NotRequired[Annotated[str, doc("Python call stack" + _ABSENT)]]
    sequence_number: NotRequired[Annotated[float, doc("Autograd sequence number" + _ABSENT)]]
    fwd_thread_id: NotRequired[Annotated[float, doc("Forward thread id" + _ABSENT)]]
    collective: NotRequired[Annotated[str, doc("Collective name" + _ABSENT)]]
    in_msg_nelems: NotRequired[Annotated[float, doc("Input elements" + _ABSENT)]]
    out_msg_nelems: NotRequired[Annotated[float, doc("Output elements" + _ABSENT)]]
    group_size: NotRequired[Annotated[float, doc("Process group size" + _ABSENT)]]
    dtype: NotRequired[Annotated[str, doc("Data type" + _ABSENT)]]
    process_group: NotRequired[Annotated[str, doc("Process group" + _ABSENT)]]
    concrete_inputs: NotRequired[Annotated[str, doc(
        "Concrete Inputs (scalar arguments), Python str of the list" + _ABSENT)]]
    flops: NotRequired[Annotated[float, doc("FLOPs recorded with with_flops=True" + _ABSENT)]]
    kernel_file: NotRequired[Annotated[str, doc("Inductor kernel source file" + _ABSENT)]]
    kernel_hash: NotRequired[Annotated[str, doc("Inductor kernel hash" + _ABSENT)]]
    kernel_backend: NotRequired[Annotated[str, doc('Inductor backend ("triton")' + _ABSENT)]]
    kernel_flop: NotRequired[Annotated[float, doc("Inductor's FLOP estimate" + _ABSENT)]]
    kernel_num_gb: NotRequired[Annotated[float, doc("Inductor's GB-moved estimate" + _ABSENT)]]


class PythonArgs(TypedDict):
    """python_function arguments present on the event."""

    python_id: NotRequired[Annotated[float, doc("Python id" + _ABSENT)]]
    python_parent_id: NotRequired[Annotated[float, doc("Parent's Python id" + _ABSENT)]]
    python_module_id: NotRequired[Annotated[float, doc("nn.Module id" + _ABSENT)]]


class EventArgs(TypedDict):
    """The event's rows of the side tables ({} where it has none)."""

    device_args: DeviceArgs
    op_args: OpArgs
    python_args: PythonArgs


class CorrelatedEvent(TypedDict):
    """An event with the same correlation id (launch <-> kernel/memcpy/memset)."""

    id: Annotated[int, doc("Event id.")]
    name: Annotated[Optional[str], doc("Name; null when absent.")]
    kind: Annotated[EventKind, doc("What the event is.")]
    ts: Annotated[Optional[float], doc("Start, absolute trace us.")]
    dur: Annotated[Optional[float], doc("Duration, us; null for instants.")]
    track: Annotated[Optional[int], doc("Track id; null when not drawn.")]
    depth: Annotated[Optional[int], doc("Depth in the track; null when not drawn.")]


class EventFlow(TypedDict):
    """A flow arrow that starts or ends on the event."""

    cat: Annotated[str, doc('Flow category, e.g. "ac2g".')]
    id: Annotated[Optional[float], doc("The flow's id in the trace.")]
    direction: Annotated[Literal["in", "out"], doc("out: starts on this event; in: ends on it.")]
    other_track: Annotated[int, doc("Track id of the other end.")]
    other_ts: Annotated[float, doc("Time of the other end, absolute trace us.")]
    other_id: Annotated[Optional[int], doc("Event id of the other end; null when not placed.")]


class TimelineEventPayload(TypedDict):
    """`/timeline/event`: everything known about one event."""

    id: Annotated[int, doc("Event id.")]
    ts: Annotated[Optional[float], doc("Start, absolute trace us.")]
    dur: Annotated[Optional[float], doc("Duration, us; null for instants and counters.")]
    ph: Annotated[Optional[str], doc('Trace event phase, e.g. "X", "i".')]
    cat: Annotated[Optional[str], doc("Trace category.")]
    name: Annotated[Optional[str], doc("Name; null when absent.")]
    pid: Annotated[Optional[str], doc("Process id, as a string.")]
    tid: Annotated[Optional[str], doc("Thread id (or stream), as a string.")]
    external_id: Annotated[Optional[float], doc("External id (links ops to launches); null "
                                                "when absent.")]
    correlation: Annotated[Optional[float], doc("Correlation id (launch <-> device event); "
                                                "null when absent.")]
    kind: Annotated[EventKind, doc("What the event is.")]
    args: Annotated[EventArgs, doc("Arguments from the side tables.")]
    track: Annotated[Optional[int], doc("Track id where it is drawn; null when not drawn.")]
    depth: Annotated[Optional[int], doc("Depth in the track; null when not drawn.")]
    parent: Annotated[Optional[int], doc("Event id of the enclosing event; null at depth 0 or "
                                         "when not drawn.")]
    drawn_end_us: NotRequired[Annotated[float, doc(
        "End as drawn (clamped into its parent), absolute us; absent when not drawn.")]]
    correlated: Annotated[list[CorrelatedEvent], doc("Events with the same correlation id.")]
    flows: Annotated[list[EventFlow], doc("Flows that start or end on the event.")]


# -- /timeline/search -----------------------------------------------------------------------------


class SearchMatch(TypedDict):
    id: Annotated[int, doc("Event id.")]
    name: Annotated[str, doc("Event name.")]
    track: Annotated[int, doc("Track id.")]
    depth: Annotated[int, doc("Depth in the track.")]
    ts: Annotated[float, doc("Start, absolute trace us.")]
    dur: Annotated[float, doc("Duration, us (0 for instants).")]


class TimelineSearchPayload(TypedDict):
    """`/timeline/search`: events whose name contains the query (case-insensitive), in time
    order."""

    query: Annotated[str, doc("The query as searched.")]
    total: Annotated[int, doc("Every matching event (from start_us on, when given).")]
    limit: Annotated[int, doc("Most matches sent.")]
    truncated: Annotated[bool, doc("total > len(matches).")]
    names: Annotated[list[str], doc("The first 50 matching distinct names.")]
    name_count: Annotated[int, doc("Matching distinct names.")]
    matches: Annotated[list[SearchMatch], doc("The first `limit` matches in time order.")]


class RangeRow(TypedDict):
    """One event name inside the range."""

    name: Annotated[str, doc("Event name.")]
    count: Annotated[int, doc("Events of that name overlapping the range.")]
    total_us: Annotated[float, doc("Their wall time inside the range, us (clipped to it).")]
    self_us: Annotated[float, doc("total_us minus that of their direct children, us.")]
    avg_us: Annotated[float, doc("total_us / count, us.")]


class TimelineRangePayload(TypedDict):
    """`/timeline/range`: the aggregate of a time range on chosen tracks (Trace view)."""

    start_us: Annotated[float, doc("Range start, trace us.")]
    end_us: Annotated[float, doc("Range end, trace us.")]
    tracks: Annotated[list[int], doc("The track ids aggregated (of `/timeline` `tracks`).")]
    events: Annotated[int, doc("Events overlapping the range on those tracks.")]
    rows: Annotated[list[RangeRow], doc("Per name, by total_us descending, ties by name.")]
