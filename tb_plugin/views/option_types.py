"""Option types shared by several views' option Structs (each view's own are in
`views/<view>/options.py`): bounds on counts, ids and request times."""

from __future__ import annotations

from typing import Annotated, Optional

from msgspec import Meta

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
