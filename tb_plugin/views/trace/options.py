"""The option Structs of the Trace view (read by `views/options.py` for the query string and the
CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
from msgspec import Meta

from ...analysis.timeline.view import DEFAULT_WIDTH, MAX_WIDTH, SEARCH_LIMIT
from ..option_types import MAX_EVENT_ID, MAX_SEARCH_LIMIT, EndUs, StartUs, TimeUs


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

class TimelineOptions(msgspec.Struct, forbid_unknown_fields=True):
    start_us: StartUs = None
    end_us: EndUs = None
    width: Annotated[int, Meta(ge=1, le=MAX_WIDTH, description=(
        "Pixels across the window."))] = DEFAULT_WIDTH
    critical_step: Optional[Annotated[str, Meta(max_length=200, description=(
        "A step name (as in the GPU Idle view's critical path): mark the events of its "
        "critical path (`events.path`, `blocks.path`) and send its edges (`critical`)."))]
                            ] = None

TrackList = Annotated[str, Meta(pattern=r"^[0-9]{1,9}(,[0-9]{1,9}){0,9999}$", description=(
    "Comma-separated track ids of `/timeline` (e.g. `0,3`); absent means every track."))]

class RangeOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    start_us: Annotated[float, TimeUs, Meta(description="Range start, in trace microseconds.")]
    end_us: Annotated[float, TimeUs, Meta(description=(
        "Range end, in trace microseconds; must be greater than `start_us`."))]
    tracks: Optional[TrackList] = None
