"""The option Structs of the Distributed (the ranks timeline) view (read by `views/options.py` for
the query string and the CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import msgspec
from msgspec import Meta

from ...analysis.timeline.view import DEFAULT_WIDTH, MAX_WIDTH
from ..option_types import TimeUs

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
