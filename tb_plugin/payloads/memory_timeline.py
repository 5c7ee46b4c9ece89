"""`/memory/timeline` (`analysis.memory_timeline`): a PyTorch memory-timeline export
(`*.raw.json.gz`), stacked bytes per category over time."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from .common import doc

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


class CategoryBytes(TypedDict):
    category: Annotated[MemoryCategory, doc("Category.")]
    bytes: Annotated[int, doc("Bytes created while profiling and never destroyed.")]


_GROWTH, _UNFREED = "kind growth only: ", "kind unfreed only: "


class MemoryTimelineLeak(TypedDict):
    """A leak hint: the total grows at every step (or window) end (kind "growth"), or memory of
    some categories was created while profiling and never destroyed (kind "unfreed")."""

    kind: Annotated[Literal["growth", "unfreed"], doc("Which check fired.")]
    steps: NotRequired[Annotated[list[str], doc(_GROWTH + 'step (or "window N") names.')]]
    allocated_at_step_end: NotRequired[Annotated[list[int], doc(
        _GROWTH + "total bytes at each step end.")]]
    growth_bytes: NotRequired[Annotated[int, doc(_GROWTH + "last minus first, bytes.")]]
    per_step_bytes: NotRequired[Annotated[int, doc(_GROWTH + "mean growth per step, bytes.")]]
    basis: NotRequired[Annotated[Literal["steps", "windows"], doc(
        _GROWTH + "the trace's steps, or equal windows when there are none.")]]
    count: NotRequired[Annotated[int, doc(_UNFREED + "tensors alive at the end minus those "
                                          "destroyed.")]]
    bytes: NotRequired[Annotated[int, doc(_UNFREED + "bytes over the categories.")]]
    by_category: NotRequired[Annotated[list[CategoryBytes], doc(_UNFREED + "per category, "
                                                                "largest first.")]]


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
    leaks: Annotated[list[MemoryTimelineLeak], doc("Leak hints.")]
