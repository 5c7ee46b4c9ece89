"""The Distributed (the ranks timeline) view's specs, builders and CSV rows."""

from __future__ import annotations

import math
from typing import Any, Optional

from ...analysis.distributed.run import as_summary
from ...analysis.distributed.summary import summary_builtins, wants_summary
from ...analysis.distributed.timeline import RankChoiceError, build_rank_timeline, chosen_workers
from ..errors import OptionError
from ..spec import SPAN, ViewSpec, never
from ..trace.spec import warm_timeline
from .options import RanksOptions
from .payload import RanksTimelinePayload


def _rank_list(options: RanksOptions) -> Optional[list[int]]:
    return None if options.ranks is None else [int(r) for r in options.ranks.split(",")]

def _offset_map(options: RanksOptions) -> dict[int, float]:
    out: dict[int, float] = {}
    for pair in (options.offsets or "").split(",") if options.offsets else []:
        rank, _, value = pair.partition(":")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not math.isfinite(number) or abs(number) > 1e12:
            raise OptionError(f"parameter 'offsets': bad offset {pair[:40]!r} (rank:us)")
        out[int(rank)] = number
    return out

def ranks_tables(inputs: dict[str, Any], options: RanksOptions) -> list[str]:
    """The workers whose tables the multi-rank timeline also reads (the chosen ranks)."""
    try:
        return chosen_workers({w: as_summary(v) for w, v in inputs.items()}, _rank_list(options))
    except RankChoiceError as exc:
        raise OptionError(str(exc)) from exc

def ranks_timeline(inputs: dict[str, Any], _skipped: dict[str, str], options: RanksOptions,
                   tables: Optional[dict[str, Any]] = None) -> Any:
    """`inputs` are summaries (the server, with the chosen `tables`) or tables (`build_view`)."""
    tables = inputs if tables is None else tables
    summaries = {w: as_summary(v) for w, v in inputs.items()}
    try:
        return build_rank_timeline(summaries, tables, ranks=_rank_list(options),
                                   start_us=options.start_us, end_us=options.end_us,
                                   width=options.width, offsets=_offset_map(options),
                                   host=options.host == "on")
    except ValueError as exc:  # RankChoiceError, or an empty or inverted window
        raise OptionError(str(exc)) from exc


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("ranks", "/ranks", "Distributed", ranks_timeline,
             payload=RanksTimelinePayload, kind=SPAN, options=RanksOptions,
             summarize=summary_builtins, summary_wanted=wants_summary,
             span_tables=ranks_tables, cache=never, prepare=warm_timeline,
             summary="All ranks on one timeline: chosen ranks' GPU streams (and host threads) "
                     "stacked on the run clock, with the matched collectives as links.",
             description="A window [start_us, end_us] of the run clock (a rank's trace us minus "
             "its clock offset,\nestimated from collective ends as `/distributed` "
             "`clocks.offsets_us`, or given by `offsets`)\ndrawn `width` pixels wide, for at "
             "most 8 ranks (default the first 8): each rank's level of\ndetail is its "
             "`/timeline` answer for that window shifted to its clock. Shape: see\n"
             "`tb_plugin.analysis.distributed.timeline.build_rank_timeline`. Computed per request "
             "from "
             "the ranks'\nsummaries and the chosen ranks' timeline indexes. JSON only.",
             errors={"400": "Bad parameter, an unknown rank, more than 8 ranks, an offset for "
                            "a rank not shown, or an empty or inverted window.",
                     "404": "Unknown run or span, or the run has no Distributed view."}),
)
