"""`/gpu_idle`: why the GPU is idle (`analysis.gpu_idle.view.build_gpu_idle`). Times are trace
us."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc
from ..overview.payload import Recommendation


class Histogram(TypedDict):
    """Counts in log-spaced bins (2 per decade from 0.1 us); empty end bins trimmed."""

    edges_us: Annotated[list[float], doc("Bin edges, us (one more than `counts`).")]
    counts: Annotated[list[int], doc("Values per bin.")]


class Formulas(TypedDict):
    """The formula of each analysis, as the UI states it."""

    temporal: str
    idle: str
    queue: str
    bandwidth: str
    launch: str
    sequences: str
    annotations: str
    critical_path: str


class DeviceTime(TypedDict):
    """Temporal breakdown of one GPU over its window (exclusive parts sum to `window_us`)."""

    device: Annotated[int, doc("GPU index.")]
    start_us: Annotated[float, doc("First device event start, us.")]
    end_us: Annotated[float, doc("Last device event end, us.")]
    window_us: Annotated[float, doc("end_us - start_us, us.")]
    compute_us: Annotated[float, doc("|C|: merged compute kernel time, us.")]
    communication_us: Annotated[float, doc("|M - C|: communication not under compute, us.")]
    memory_us: Annotated[float, doc("|Y - (C u M)|: memcpy/memset under neither, us.")]
    idle_us: Annotated[float, doc("Window minus all device busy time, us.")]
    compute_communication_overlap_us: Annotated[float, doc("|C n M|, us (inside compute).")]
    idle_pct: Annotated[float, doc("idle_us / window_us, percent.")]


class StreamIdle(TypedDict):
    device: Annotated[int, doc("GPU index.")]
    stream: Annotated[int, doc("Stream id.")]
    events: Annotated[int, doc("Device events on the stream.")]
    busy_us: Annotated[float, doc("Merged busy time, us.")]
    idle_us: Annotated[float, doc("Sum of gaps between its events, us.")]
    host_wait_us: Annotated[float, doc("Gaps whose next event was launched after the "
                                       "stream went idle, us.")]
    kernel_wait_us: Annotated[float, doc("Gaps < kernel_wait_us between queued events, us.")]
    other_us: Annotated[float, doc("The other gaps, us.")]
    gaps: Annotated[int, doc("Number of gaps.")]


class Gap(TypedDict):
    device: int
    stream: int
    start_us: Annotated[float, doc("Gap start (end of the previous event), us.")]
    end_us: Annotated[float, doc("Gap end (start of the next event), us.")]
    gap_us: Annotated[float, doc("Length, us.")]
    cause: Annotated[Literal["host_wait", "kernel_wait", "other"], doc("Its cause.")]
    next_event: Annotated[int, doc("Event id of the event after the gap (Trace view).")]


class IdleBreakdown(TypedDict):
    kernel_wait_us: Annotated[float, doc("Threshold of a kernel wait, us.")]
    streams: list[StreamIdle]
    gap_histogram: Annotated[Histogram, doc("Distribution of all gaps.")]
    largest_gaps: Annotated[list[Gap], doc("The 10 longest gaps.")]


class LaunchOutlier(TypedDict):
    event: Annotated[int, doc("Kernel event id.")]
    launch_event: Annotated[int, doc("Launch call event id.")]
    name: Annotated[str, doc("Kernel name.")]
    start_us: Annotated[float, doc("Kernel start, us.")]
    cpu_us: Annotated[float, doc("Launch call duration, us.")]
    gpu_us: Annotated[float, doc("Kernel duration, us.")]
    delay_us: Annotated[float, doc("Kernel start - launch call end, us.")]


class LaunchHistograms(TypedDict):
    cpu_us: Histogram
    gpu_us: Histogram
    delay_us: Annotated[Histogram, doc("Negative delays counted as 0.")]


class LaunchStats(TypedDict):
    kernels: Annotated[int, doc("Kernels with a launch call.")]
    runtime_cutoff_us: float
    delay_cutoff_us: float
    cpu_us_total: Annotated[float, doc("Sum of launch call durations, us.")]
    gpu_us_total: Annotated[float, doc("Sum of kernel durations, us.")]
    short_kernels: Annotated[int, doc("Kernels with gpu < cpu.")]
    short_kernel_gpu_us: Annotated[float, doc("Their GPU time, us.")]
    mean_delay_us: Optional[float]
    median_delay_us: Optional[float]
    runtime_outliers: Annotated[int, doc("Launches with cpu > runtime_cutoff_us.")]
    delay_outliers: Annotated[int, doc("Kernels with delay > delay_cutoff_us.")]
    top_runtime_outliers: list[LaunchOutlier]
    top_delay_outliers: list[LaunchOutlier]
    histograms: LaunchHistograms


class QueueSeries(TypedDict):
    t_us: Annotated[list[float], doc("Times (at most 400 buckets: the bucket's start), us.")]
    length: Annotated[list[float], doc("Queue length from that time (bucket maximum).")]


class StreamQueue(TypedDict):
    device: int
    stream: int
    max: Annotated[int, doc("Longest queue.")]
    mean: Annotated[float, doc("Time-weighted mean length.")]
    full_us: Annotated[float, doc("Time with length >= queue_full, us.")]
    series: QueueSeries


class QueueLengths(TypedDict):
    queue_full: Annotated[int, doc("Length counted as a full queue.")]
    streams: list[StreamQueue]


class CopyKind(TypedDict):
    kind: Annotated[Literal["HtoD", "DtoH", "DtoD", "memset", "other"], doc("Copy kind.")]
    count: int
    bytes: Annotated[Optional[float], doc("Bytes moved; null when the trace has no sizes.")]
    busy_us: Annotated[float, doc("Merged time with such a copy running, us.")]
    mean_gbps: Annotated[Optional[float], doc(
        "Time-weighted mean of the running copies' summed bandwidth over the busy time "
        "(= bytes / busy time when each copy's bandwidth is its bytes / duration), GB/s; null "
        "when no copy has a positive duration.")]
    peak_gbps: Annotated[float, doc(
        "The true maximum of the running copies' summed bandwidth (not a bucket mean), GB/s; "
        "never below mean_gbps or any bucket of the series.")]


class BandwidthSeries(TypedDict):
    t_us: Annotated[list[float], doc("Bucket starts, us.")]
    gbps: Annotated[dict[str, list[float]], doc("Per copy kind: mean GB/s per bucket.")]


class Bandwidth(TypedDict):
    kinds: list[CopyKind]
    series: BandwidthSeries


class KernelSequence(TypedDict):
    operator: Annotated[str, doc("The operator that launched the kernels.")]
    kernels: Annotated[list[str], doc("Kernel names in launch order.")]
    count: Annotated[int, doc("Calls of the operator with exactly this sequence.")]
    gpu_us: Annotated[float, doc("Sum of the kernels' durations, us.")]
    cpu_us: Annotated[float, doc("Sum of the operator's host durations, us.")]
    fusion_candidate: Annotated[bool, doc("Two or more kernels.")]


class AnnotationTime(TypedDict):
    side: Annotated[Literal["host", "gpu"], doc("record_function (host) or "
                                                "gpu_user_annotation (GPU) ranges.")]
    name: str
    ranges: Annotated[int, doc("Ranges with this name.")]
    wall_us: Annotated[float, doc("Sum of their durations, us.")]
    gpu_us: Annotated[float, doc("GPU time of the kernels attributed to them (leaf-most), "
                                 "us.")]
    kernels: int


class PathShares(TypedDict):
    host_compute: float
    launch: float
    runtime: float
    kernel: float
    sync: float
    idle: float
    backlog: Annotated[float, doc("Launch-to-kernel waits of >= 1 ms (work the trace does "
                                  "not show, or a clock offset), us.")]


class CriticalStep(TypedDict):
    step: str
    start_us: float
    end_us: float
    length_us: float
    nodes: Annotated[int, doc("Events on the path.")]
    shares_us: Annotated[PathShares, doc("The path's time by kind, us; sums to length_us.")]


class CriticalPath(TypedDict):
    formula: str
    steps: Annotated[list[CriticalStep], doc("The first 64 steps.")]
    truncated: Annotated[bool, doc("More steps than shown.")]
    step: Annotated[Optional[str], doc("The step whose path is in event_ids.")]
    event_ids: Annotated[list[int], doc("Event ids on that step's path (Trace view).")]


class GraphOwner(TypedDict):
    name: Annotated[str, doc("Operator or annotation enclosing the graph launch.")]
    kind: Annotated[Literal["operator", "annotation"], doc("Which of the two.")]
    kernels: Annotated[int, doc("Replayed kernels attributed to it.")]
    kernel_us: Annotated[float, doc("Their GPU time, us.")]


class GraphBacklog(TypedDict):
    device: int
    offset_us: Annotated[float, doc("Smallest launch-to-start delay of the GPU's launches, "
                                    "us (>= 1000 us for a backlog).")]
    median_delay_us: float
    events: Annotated[int, doc("Launches (charged device events) it is taken over.")]
    message: str


class GraphSummary(TypedDict):
    """`analysis.graphs.graph_summary`: CUDA/HIP graph facts of the trace."""

    mode: Annotated[Literal["none", "replay", "capture"], doc(
        "replay: kernels replayed by graph launches; capture: launches recorded in stream "
        "capture and never run (no utilization, MFU or idle numbers); none.")]
    launches: Annotated[int, doc("Graph launch calls.")]
    launch_us: Annotated[float, doc("Sum of their durations, us.")]
    replayed_kernels: Annotated[int, doc("Kernels started by graph launches.")]
    replayed_kernel_us: Annotated[float, doc("Their GPU time, us.")]
    attributed_kernel_us: Annotated[float, doc("The part whose launch lies in an operator or "
                                               "a host annotation, us.")]
    owners: Annotated[list[GraphOwner], doc("Top 20 by kernel time.")]
    captured_launches: Annotated[int, doc("Launch/copy/memset calls inside stream capture.")]
    capture_windows: Annotated[int, doc("Begin/EndCapture windows.")]
    backlog: Annotated[list[GraphBacklog], doc("GPUs whose kernels all start long after "
                                               "their launch.")]
    notes: Annotated[list[str], doc("Sentences for the UI.")]


class GpuIdlePayload(TypedDict):
    """`/gpu_idle`: the diagnosis of one worker span."""

    applicable: Annotated[bool, doc("False when the trace has no device work, or is a graph "
                                    "capture trace.")]
    message: Annotated[Optional[str], doc("Why the GPU analyses do not apply, or null.")]
    vendor: Annotated[Literal["nvidia", "amd", "unknown"], doc("GPU vendor of the trace.")]
    formulas: Annotated[Formulas, doc("Each analysis's formula, as the UI states it.")]
    temporal: Annotated[list[DeviceTime], doc("Per GPU.")]
    idle: Annotated[IdleBreakdown, doc("Idle-time causes per stream, with the gaps.")]
    launch: Annotated[LaunchStats, doc("Kernel launch statistics.")]
    queue: Annotated[QueueLengths, doc("Queue length per stream.")]
    bandwidth: Annotated[Bandwidth, doc("Memory-copy bandwidth over time.")]
    sequences: Annotated[list[KernelSequence], doc("Top 20 by GPU time.")]
    annotations: Annotated[list[AnnotationTime], doc("By GPU time, then wall time.")]
    critical_path: Annotated[CriticalPath, doc("Critical path per step.")]
    graphs: Annotated[GraphSummary, doc("CUDA/HIP graph replay/capture facts.")]
    recommendations: Annotated[list[Recommendation], doc("As on the Overview.")]
