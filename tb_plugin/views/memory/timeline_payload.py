"""`/memory/timeline` (`analysis.memory.timeline`): a PyTorch memory-timeline export
(`*.raw.json.gz`), stacked bytes per category over time."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc

MemoryCategory = Literal["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION",
                         "GRADIENT", "AUTOGRAD_DETAIL", "UNKNOWN"]


class MemoryTimelineSeries(TypedDict):
    """Bytes alive per category at each time of `t_us`."""

    PARAMETER: list[int]
    OPTIMIZER_STATE: list[int]
    INPUT: list[int]
    TEMPORARY: list[int]
    ACTIVATION: list[int]
    GRADIENT: list[int]
    AUTOGRAD_DETAIL: list[int]
    UNKNOWN: list[int]


class MemoryTimelinePeak(TypedDict):
    bytes: Annotated[int, doc("Peak total bytes.")]
    t_us: Annotated[float, doc("When, us (3 decimals).")]


class MemoryTimelineLeak(TypedDict):
    """A growth flag: the total at every profiler step end rose above the noise, by at least
    1 MiB in all, over at least 3 steps (the rule of `/memory`). Needs the trace's steps;
    memory alive when the export ends is never flagged."""

    kind: Annotated[Literal["growth"], doc("The check that fired.")]
    steps: Annotated[list[str], doc("Step names.")]
    allocated_at_step_end: Annotated[list[int], doc("Total bytes at each step end.")]
    growth_bytes: Annotated[int, doc("Last minus first, bytes.")]
    per_step_bytes: Annotated[int, doc("Mean growth per step, bytes.")]
    noise_bytes: Annotated[int, doc("Each rise exceeded this, bytes.")]
    basis: Annotated[Literal["steps"], doc("The trace's profiler steps.")]


class MemoryTimelinePayload(TypedDict):
    """`/memory/timeline`: down-sampled stacked bytes per category. Times are
    (ts_ns - base_time_ns) / 1000: on the trace's clock when paired with a trace span, else
    on the export's own clock."""

    categories: Annotated[list[MemoryCategory], doc("Categories, in stacking order.")]
    t_us: Annotated[list[float], doc("Times, us (3 decimals).")]
    series: Annotated[MemoryTimelineSeries, doc("Bytes per category at each time.")]
    total: Annotated[list[int], doc("Total bytes at each time.")]
    peak: Annotated[Optional[MemoryTimelinePeak], doc("Peak total; null for an empty export.")]
    records: Annotated[int, doc("Records read.")]
    skipped: Annotated[int, doc("Malformed records skipped.")]
    messages: Annotated[list[str], doc("Caveats about the export.")]
    base_time_ns: Annotated[Optional[int], doc("The trace's baseTimeNanoseconds (0 when the "
                                               "trace has none); null on the export's clock.")]
    leaks: Annotated[list[MemoryTimelineLeak], doc("Growth flags (with a trace's steps).")]
