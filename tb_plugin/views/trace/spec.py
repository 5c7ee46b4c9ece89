"""The Trace view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.timeline.counters import timeline_extras
from ...analysis.timeline.range import build_timeline_range
from ...analysis.timeline.view import build_timeline, event_details, search_timeline
from ...output import rows
from ...output.rows import Rows
from ..errors import NotInTrace, OptionError
from ..spec import ViewSpec, never
from .options import EventOptions, RangeOptions, SearchOptions, TimelineOptions
from .payload import (
    TimelineEventPayload,
    TimelinePayload,
    TimelineRangePayload,
    TimelineSearchPayload,
)


def warm_timeline(table: Any) -> None:
    """The timeline index and counter tracks of a table (seconds on a big trace, then memoised
    on the table): run in the background when a table is read, and before timeline requests."""
    timeline_extras(table)  # builds the index first

def timeline(table: Any, options: TimelineOptions) -> Any:
    try:
        return build_timeline(table, options.start_us, options.end_us, options.width,
                              options.critical_step)
    except ValueError as exc:  # an empty or inverted window
        raise OptionError(str(exc)) from exc
    except KeyError as exc:
        raise NotInTrace(f"no step {options.critical_step[:120]!r} in this worker span"
                         ) from exc

def timeline_event(table: Any, options: EventOptions) -> Any:
    try:
        return event_details(table, options.event_id)
    except KeyError as exc:
        raise NotInTrace(f"no event {options.event_id} in this worker span") from exc

def timeline_search(table: Any, options: SearchOptions) -> Any:
    return search_timeline(table, options.query, limit=options.limit, start_us=options.start_us)

def timeline_range(table: Any, options: RangeOptions) -> Any:
    text = options.tracks  # matches TrackList's pattern (checked by `read_options`)
    tracks = None if text is None else [int(part) for part in text.split(",")]
    try:
        return build_timeline_range(table, options.start_us, options.end_us, tracks)
    except ValueError as exc:  # an empty or inverted range, an unknown track
        raise OptionError(str(exc)) from exc


def search_rows(payload: dict[str, Any]) -> Rows:
    return payload["matches"]


_TIMELINE = {"cache": never, "prepare": warm_timeline}

SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("timeline", "/timeline", "Trace", timeline,
             payload=TimelinePayload, options=TimelineOptions, **_TIMELINE,
             summary="Level-of-detail trace timeline of one window (Trace view).",
             description="Events at least a pixel wide, runs of narrower ones as counted "
             "blocks, step ranges, flow\narrows and counter tracks sampled per pixel, for the "
             "window [start_us, end_us] (trace\nus; default the whole trace) drawn `width` "
             "pixels wide. Shape: see\n`tb_plugin.analysis.timeline.view.build_timeline`; times in "
             "`tracks`, `steps`, `flows` and\n`counters` are us relative to `origin_us`. Under "
             "1 MB of JSON at any zoom. Computed per\nrequest (never cached); the per-file "
             "index it reads is built once, in the background as\nsoon as the file's table is "
             "read by the server. JSON only.",
             errors={"400": "Bad parameter, or an empty or inverted window (start_us >= "
                            "end_us)."}),
    ViewSpec("timeline_event", "/timeline/event", "Trace", timeline_event,
             payload=TimelineEventPayload,
             options=EventOptions, **_TIMELINE,
             summary="Everything known about one event (Trace view details panel).",
             description="Its columns and arguments, where it is drawn (track, depth, "
             "parent), its correlation\npartners (launch <-> kernel/memcpy/memset) and the "
             "flows that end on it. See\n`tb_plugin.analysis.timeline.view.event_details`. JSON "
             "only.",
             errors={"404": "Unknown run/worker/span, or no event with that id."}),
    ViewSpec("timeline_search", "/timeline/search", "Trace", timeline_search,
             payload=TimelineSearchPayload,
             options=SearchOptions, rows=search_rows, **_TIMELINE,
             summary="Events whose name contains `q` (case-insensitive), in time order.",
             description='`{"query", "total", "limit", "truncated", "names", "name_count", '
             '"matches": [{"id",\n"name", "track", "depth", "ts", "dur"}]}` (`ts` in trace '
             'us). With `format=csv`, the\nmatches.'),
    ViewSpec("timeline_range", "/timeline/range", "Trace", timeline_range,
             payload=TimelineRangePayload, options=RangeOptions, rows=rows.payload_rows,
             **_TIMELINE,
             summary="Counts, total and self time by event name inside a time range, on "
                     "chosen tracks (Trace view's range selection).",
             description="Events overlapping [start_us, end_us] (trace us) on `tracks`; "
             "times are clipped to the\nrange, self time subtracts the direct children's. "
             "Computed per request from the timeline\nindex. Shape: see "
             "`tb_plugin.analysis.timeline.range.build_timeline_range`. With\n`format=csv`, "
             "the rows.",
             errors={"400": "Bad parameter, an empty or inverted range, or an unknown track "
                            "id."}),
)
