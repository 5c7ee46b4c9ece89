"""`/ranks` (`analysis.distributed.timeline`): chosen ranks of one span stacked on one clock, the
run's
(a rank's trace us minus its clock offset). The shape is `/timeline`'s, so the trace painter
draws it, plus the lanes, the offsets used and the matched collectives as links. Times inside
the window are us since `origin_us` (run clock)."""

from typing import Annotated, Literal

from typing_extensions import TypedDict

from ...payloads.common import doc
from ..trace.payload import CounterTrack, TimelineFlows, TimelineStats, TimelineSteps, Track

_REL = "us since origin_us (run clock)"


class RankTrack(Track):
    """A GPU stream (or host thread) of one rank; `process` is prefixed "rank R · ", so each
    rank is one group of tracks (a lane). `id`s are renumbered across lanes; event `id`s are the
    rank's own (for `/timeline/event` of that worker)."""

    lane: Annotated[int, doc("Index into `lanes`.")]
    worker: Annotated[str, doc("Worker of the lane.")]
    rank: Annotated[int, doc("Rank of the lane (`distributedInfo`, else the worker's index).")]


class RankLane(TypedDict):
    worker: Annotated[str, doc("Worker.")]
    rank: Annotated[int, doc("Rank (`distributedInfo`, else the worker's index).")]
    offset_us: Annotated[float, doc("Offset used: the rank's clock minus the run's, us; its "
                                    "events are drawn this much earlier.")]
    estimated_offset_us: Annotated[float, doc(
        "Offset estimated from collective ends (median over shared collectives of the rank's "
        "end minus the collective's median end), us; as `/distributed` `clocks.offsets_us`.")]
    overridden: Annotated[bool, doc("`offset_us` was given by the `offsets` option.")]
    tracks: Annotated[list[int], doc("Track ids of the lane.")]


class CollectiveLinks(TypedDict):
    """Matched collectives seen on at least two shown ranks and overlapping the window; per
    collective (`id`, `name`) and per (collective, lane) item the rank's span: kernel span,
    else host range (parallel arrays)."""

    total: Annotated[int, doc("Collectives in the window.")]
    capped: Annotated[bool, doc("More than `limit`: an even sample is sent.")]
    limit: Annotated[int, doc("Most collectives sent (1000).")]
    id: Annotated[list[int], doc("Collective id, as in `/distributed` `collectives.rows[].id`.")]
    name: Annotated[list[str], doc('Op name, e.g. "nccl:all_reduce".')]
    item_collective: Annotated[list[int], doc("Index into `id` / `name`.")]
    item_lane: Annotated[list[int], doc("Index into `lanes`.")]
    item_start: Annotated[list[float], doc(f"Rank's arrival (kernel start, else host start), "
                                           f"{_REL}.")]
    item_end: Annotated[list[float], doc(f"Rank's end, {_REL}.")]


class RanksTimelinePayload(TypedDict):
    """`/ranks`: one window of the run clock over the chosen ranks, level of detail applied."""

    view: Annotated[Literal["ranks"], doc('Always "ranks".')]
    start_us: Annotated[float, doc("Window start, run clock us (absolute).")]
    end_us: Annotated[float, doc("Window end, run clock us.")]
    width: Annotated[int, doc("Width in pixels the window was laid out for.")]
    us_per_px: Annotated[float, doc("Microseconds per pixel.")]
    origin_us: Annotated[float, doc("Run clock us that relative times count from (= start_us).")]
    trace_start_us: Annotated[float, doc("First event over the shown ranks, run clock us.")]
    trace_end_us: Annotated[float, doc("Last event end over the shown ranks, run clock us.")]
    merge_px: Annotated[float, doc("Largest merge threshold over the ranks' answers, px.")]
    names: Annotated[list[str], doc("Event names of all lanes, indexed by `events.name`.")]
    tracks: Annotated[list[RankTrack], doc("GPU streams (and host threads with host=on), lane "
                                           "by lane.")]
    steps: Annotated[TimelineSteps, doc("Profiler steps of the first shown rank.")]
    flows: Annotated[TimelineFlows, doc(
        'The collective links as flows (category "collective"): per collective, an arrow from '
        "each lane's end to the next lane's end, on the lane's GPU stream running most of its "
        "communication kernels (else its first track).")]
    counters: Annotated[list[CounterTrack], doc("Always empty (counters are per rank).")]
    stats: Annotated[TimelineStats, doc("Level-of-detail statistics summed over the lanes.")]
    lanes: Annotated[list[RankLane], doc("One per shown rank, in rank order.")]
    ranks: Annotated[list[int], doc("Every rank of the span (to choose from).")]
    max_ranks: Annotated[int, doc("Most ranks per request (8).")]
    host: Annotated[bool, doc("Host threads are included.")]
    links: Annotated[CollectiveLinks, doc("Matched collectives across the shown ranks.")]
