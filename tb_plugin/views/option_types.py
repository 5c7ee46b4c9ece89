"""The views' option Structs: what each data route takes, with bounds, defaults and
descriptions (read once, for the query string and the CLI's flags alike, by `options.py`).
"""


from __future__ import annotations

from typing import Annotated, Literal, Optional

import msgspec
from msgspec import Meta

from ..analysis.gpu_idle import (
    DEFAULT_DELAY_CUTOFF_US,
    DEFAULT_KERNEL_WAIT_US,
    DEFAULT_QUEUE_FULL,
    DEFAULT_RUNTIME_CUTOFF_US,
)
from ..analysis.timeline import (
    DEFAULT_WIDTH,
    MAX_WIDTH,
    SEARCH_LIMIT,
)
from ..ingest.schema import MAX_TIME_US

MAX_TOP_N = 1_000_000
MAX_SEARCH_LIMIT = 10_000
MAX_EVENT_ID = 2**62

TopN = Optional[Annotated[int, Meta(ge=1, le=MAX_TOP_N, description=(
    "Number of slices (1 to 1000000); absent means all."))]]
#: Request times are bounded like the parser's (`MAX_TIME_US`): `1e308` answers 400, not 500.
TimeUs = Meta(ge=-MAX_TIME_US, le=MAX_TIME_US)
StartUs = Optional[Annotated[float, TimeUs, Meta(description=(
    "Range start, in trace microseconds (the `ts` clock of the trace)."))]]
EndUs = Optional[Annotated[float, TimeUs, Meta(description=(
    "Range end, in trace microseconds; must be greater than `start_us`."))]]
OperatorGroup = Literal["operator", "operator_input_shape"]


class OperatorOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"


class OperatorPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"
    top_n: TopN = None


class OperatorStackOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    group_by: OperatorGroup = "operator"
    name: Annotated[str, Meta(description="The operator name, as in the operator table.")]
    input_shape: Optional[Annotated[str, Meta(description=(
        "Only with `group_by=operator_input_shape`; the row's input shape."))]] = None


class KernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Literal["kernel", "kernel_op_launch"] = "kernel"


class KernelPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    top_n: TopN = None


class TimelineOptions(msgspec.Struct, forbid_unknown_fields=True):
    start_us: StartUs = None
    end_us: EndUs = None
    width: Annotated[int, Meta(ge=1, le=MAX_WIDTH, description=(
        "Pixels across the window."))] = DEFAULT_WIDTH
    critical_step: Optional[Annotated[str, Meta(max_length=200, description=(
        "A step name (as in the GPU Idle view's critical path): mark the events of its "
        "critical path (`events.path`, `blocks.path`) and send its edges (`critical`)."))]
                            ] = None


class EventOptions(msgspec.Struct, forbid_unknown_fields=True):
    event_id: Annotated[int, Meta(ge=0, le=MAX_EVENT_ID, description=(
        "An event id, as in the `id` lists of `/timeline` and `/timeline/search`."))
                        ] = msgspec.field(name="id")


class SearchOptions(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(description="Text in event names (case-insensitive).")
                     ] = msgspec.field(name="q")
    limit: Annotated[int, Meta(ge=1, le=MAX_SEARCH_LIMIT, description=(
        "Matches returned; `total` counts all of them."))] = SEARCH_LIMIT
    start_us: Optional[Annotated[float, TimeUs, Meta(description=(
        "Only matches starting at or after this trace time (to page on)."))]] = None


TrackList = Annotated[str, Meta(pattern=r"^[0-9]{1,9}(,[0-9]{1,9}){0,9999}$", description=(
    "Comma-separated track ids of `/timeline` (e.g. `0,3`); absent means every track."))]


class RangeOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    start_us: Annotated[float, TimeUs, Meta(description="Range start, in trace microseconds.")]
    end_us: Annotated[float, TimeUs, Meta(description=(
        "Range end, in trace microseconds; must be greater than `start_us`."))]
    tracks: Optional[TrackList] = None


class MemoryOptions(msgspec.Struct, forbid_unknown_fields=True):
    device: Optional[Annotated[str, Meta(description=(
        "A device name from `devices` (e.g. `CPU`, `GPU0`)."))]] = None
    start_us: StartUs = None
    end_us: EndUs = None


SnapshotUnits = ("In the payload's `clock`: trace us (`trace`), the snapshot's own us "
                 "(`snapshot`) or entry numbers (`entry`).")


class SnapshotOptions(msgspec.Struct, forbid_unknown_fields=True):
    snapshot: Optional[Annotated[str, Meta(description=(
        "A snapshot file name from `snapshots`; default the one named after the span's "
        "trace, else the run's first."))]] = None
    device: Optional[Annotated[str, Meta(description=(
        "A device name from `devices` (e.g. `GPU0`); default the first."))]] = None
    start: Optional[Annotated[float, TimeUs, Meta(description="Range start. " + SnapshotUnits)]
                    ] = None
    end: Optional[Annotated[float, TimeUs, Meta(description="Range end. " + SnapshotUnits)]
                  ] = None
    at: Optional[Annotated[float, TimeUs, Meta(description=(
        "The instant of `segments`; default the peak. " + SnapshotUnits))]] = None


DiffBasis = Annotated[Literal["per_step", "total"], Meta(description=(
    "per_step: each side divided by its own ProfilerStep count (totals when a side has none); "
    "total: over the whole span. One basis for every number of the payload."))]


class DiffOptions(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, Meta(description=(
        "A node path from the payload (`0` the root, `0-1` its second child, ...)."))] = "0"
    basis: DiffBasis = "per_step"


class DiffKernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Annotated[Literal["kernel", "operator_kernel"], Meta(description=(
        "kernel: by kernel name; operator_kernel: by launching operator and kernel name."))
                        ] = "kernel"
    basis: DiffBasis = "per_step"


RankList = Annotated[str, Meta(pattern=r"^[0-9]{1,9}(,[0-9]{1,9}){0,7}$", description=(
    "Comma-separated ranks to stack (at most 8, e.g. `0,3`); default the first 8."))]
_OFFSET = r"[0-9]{1,9}:-?[0-9.eE+-]{1,24}"
OffsetList = Annotated[str, Meta(pattern=rf"^{_OFFSET}(,{_OFFSET}){{0,7}}$", description=(
    "Clock offsets overriding the estimate, `rank:us` pairs (e.g. `1:-85.5,3:12`): the rank's "
    "clock minus the run's, us; the rank's events are drawn `us` earlier."))]


class RanksOptions(msgspec.Struct, forbid_unknown_fields=True):
    ranks: Optional[RankList] = None
    start_us: Optional[Annotated[float, TimeUs, Meta(description=(
        "Window start, on the run clock (a rank's trace us minus its offset)."))]] = None
    end_us: Optional[Annotated[float, TimeUs, Meta(description=(
        "Window end, on the run clock; must be greater than `start_us`."))]] = None
    width: Annotated[int, Meta(ge=1, le=MAX_WIDTH, description=(
        "Pixels across the window."))] = DEFAULT_WIDTH
    offsets: Optional[OffsetList] = None
    host: Annotated[Literal["off", "on"], Meta(description=(
        "`on`: the ranks' host threads too, under their GPU streams."))] = "off"


Micros = Annotated[float, Meta(ge=0, le=1e9)]


class GpuIdleOptions(msgspec.Struct, forbid_unknown_fields=True):
    kernel_wait_us: Annotated[Micros, Meta(description=(
        "Longest gap between queued kernels counted as kernel wait, us."))
    ] = DEFAULT_KERNEL_WAIT_US
    runtime_cutoff_us: Annotated[Micros, Meta(description=(
        "Launch calls longer than this are runtime outliers, us."))] = DEFAULT_RUNTIME_CUTOFF_US
    delay_cutoff_us: Annotated[Micros, Meta(description=(
        "Launch delays longer than this are outliers, us."))] = DEFAULT_DELAY_CUTOFF_US
    queue_full: Annotated[int, Meta(ge=1, le=1_000_000, description=(
        "Queue length counted as full."))] = DEFAULT_QUEUE_FULL
    step: Optional[Annotated[str, Meta(description=(
        "Step whose critical path event ids are returned (default: the first)."))]] = None
