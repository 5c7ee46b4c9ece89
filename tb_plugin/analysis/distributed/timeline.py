"""All ranks on one timeline: the run-level Trace mode of the Distributed view (`/ranks`).

Chosen ranks' GPU streams (and, on request, their host threads) are stacked on one clock, the
run's: a rank's trace time `t` is drawn at `t - offset`, where `offset` is that rank's clock
minus the run's, estimated from collective ends exactly as `/distributed`'s `clocks.offsets_us`
(`dist_match.clock_offsets`, over every rank of the span), or given by the user.

Level of detail is the single-file timeline's (`timeline.build_timeline` on each rank's own
index): for a window [S, E] on the run clock, rank w answers its window [S + offset_w,
E + offset_w] on its own clock, whose times relative to its origin are already relative to S on
the run clock, so merging is renumbering only: name tables are concatenated (each lane's name
indices shifted by the names before it) and track ids renumbered across lanes, one lane (group
of tracks, `process` "rank R · ...") per rank.

Matched collectives (from the ranks' summaries: `dist_match`) become links: per collective, each
chosen rank's span (kernel span, else host range) on the run clock, and one flow arrow between
consecutive lanes at the collective's end (everyone leaves together, so aligned ends line up),
on the stream that runs most of the rank's communication kernels.
At most `MAX_RANKS` ranks per request and `MAX_LINKS` collectives per window (an even sample).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..events import comm_kernel_mask
from ..timeline.view import DEFAULT_WIDTH, build_timeline, build_timeline_index
from .match import call_frame, clock_offsets, group_sizes, match, with_waits
from .summary import RankSummary

MAX_RANKS = 8
MAX_LINKS = 1000
LINK_CAT = "collective"


class RankChoiceError(ValueError):
    """A requested rank is not in the span, or too many ranks were asked for."""


def rank_labels(summaries: dict[str, RankSummary]) -> dict[str, int]:
    """Worker -> its rank (`distributedInfo`), else its index among the sorted workers."""
    return {w: s.rank if s.rank is not None else i
            for i, (w, s) in enumerate(sorted(summaries.items()))}


def chosen_workers(summaries: dict[str, RankSummary], ranks: Optional[list[int]]) -> list[str]:
    """The workers of `ranks` (default: the first MAX_RANKS ranks), in rank order."""
    labels = rank_labels(summaries)
    by_rank = sorted(labels, key=lambda w: (labels[w], w))
    if ranks is None:
        return by_rank[:MAX_RANKS]
    if len(ranks) > MAX_RANKS:
        raise RankChoiceError(f"at most {MAX_RANKS} ranks per request ({len(ranks)} asked)")
    missing = sorted(set(ranks) - set(labels.values()))
    if missing:
        raise RankChoiceError(f"no rank {', '.join(map(str, missing))} in this span; ranks: "
                              f"{', '.join(str(labels[w]) for w in by_rank[:64])}")
    wanted = set(ranks)
    return [w for w in by_rank if labels[w] in wanted]


def estimated_offsets(summaries: dict[str, RankSummary]) -> tuple[dict[str, float], pd.DataFrame]:
    """(worker -> clock offset in us, the calls keyed by collective) over every rank."""
    workers = sorted(summaries)
    ordered = {w: summaries[w] for w in workers}
    calls = call_frame(ordered)
    if len(calls) == 0:
        return {w: 0.0 for w in workers}, calls
    sizes, world = group_sizes(ordered)
    keyed = with_waits(calls, match(calls, sizes, world))
    offsets = clock_offsets(keyed, len(workers))
    return {w: float(o) for w, o in zip(workers, offsets)}, keyed


def shift_window(start_us: float, end_us: float, offset_us: float) -> tuple[float, float]:
    """A run-clock window on a rank's clock (offset = the rank's clock minus the run's)."""
    return start_us + offset_us, end_us + offset_us


def build_rank_timeline(summaries: dict[str, RankSummary], tables: dict[str, TraceTable], *,
                        ranks: Optional[list[int]] = None, start_us: Optional[float] = None,
                        end_us: Optional[float] = None, width: int = DEFAULT_WIDTH,
                        offsets: Optional[dict[int, float]] = None,
                        host: bool = False) -> dict[str, Any]:
    """The `/ranks` payload: `summaries` of every worker of the span, `tables` of (at least) the
    chosen ones; `offsets` overrides the estimate per rank (us). Raises RankChoiceError for bad
    ranks and ValueError for an empty or inverted window."""
    labels = rank_labels(summaries)
    chosen = chosen_workers(summaries, ranks)
    unknown = sorted(set(offsets or {}) - {labels[w] for w in chosen})
    if unknown:
        raise RankChoiceError(f"offset given for rank {', '.join(map(str, unknown))}, which is "
                              "not shown")
    estimated, keyed = estimated_offsets(summaries)
    used = {w: float((offsets or {}).get(labels[w], estimated[w])) for w in chosen}
    extents = {}
    for w in chosen:
        index = build_timeline_index(tables[w])
        extents[w] = (float(index.us(0)) - used[w], float(index.us(index.end_tick)) - used[w])
    run_start = min(lo for lo, _ in extents.values())
    run_end = max(hi for _, hi in extents.values())
    lo = run_start if start_us is None else float(start_us)
    hi = run_end if end_us is None else float(end_us)
    if start_us is None and end_us is None and hi <= lo:
        hi = lo + 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"bad window [{lo}, {hi}]: need start_us < end_us")
    answers = [build_timeline(tables[w], *shift_window(lo, hi, used[w]), width) for w in chosen]
    merged = merge_lanes(chosen, [labels[w] for w in chosen], answers, host)
    links = collective_links(keyed, sorted(summaries), chosen, used, lo, hi)
    anchors = [comm_track(tables[w], [merged["tracks"][t] for t in merged["lane_tracks"][i]])
               for i, w in enumerate(chosen)]
    merged["flows"] = link_flows(links, anchors)
    first = answers[0]
    return {
        "view": "ranks", "start_us": lo, "end_us": hi, "width": first["width"],
        "us_per_px": first["us_per_px"], "origin_us": lo, "trace_start_us": run_start,
        "trace_end_us": run_end, "merge_px": max(a["merge_px"] for a in answers),
        "names": merged["names"], "tracks": merged["tracks"], "steps": first["steps"],
        "flows": merged["flows"], "counters": [],
        "stats": {k: sum(a["stats"][k] for a in answers) for k in first["stats"]},
        "lanes": [{"worker": w, "rank": labels[w], "offset_us": round(used[w], 3),
                   "estimated_offset_us": round(estimated[w], 3),
                   "overridden": labels[w] in (offsets or {}),
                   "tracks": merged["lane_tracks"][i]} for i, w in enumerate(chosen)],
        "ranks": sorted(labels.values()), "max_ranks": MAX_RANKS, "host": host,
        "links": links,
    }


def merge_lanes(workers: list[str], ranks: list[int], answers: list[dict[str, Any]],
                host: bool) -> dict[str, Any]:
    """One name table and one track list for all lanes: lane i's name indices shift by the
    names of lanes before it, track ids are renumbered in lane order; GPU tracks (and CPU
    tracks with `host`) only."""
    kinds = {"gpu", "cpu"} if host else {"gpu"}
    names: list[str] = []
    tracks: list[dict[str, Any]] = []
    lane_tracks: list[list[int]] = []
    for lane, (worker, rank, answer) in enumerate(zip(workers, ranks, answers)):
        shift = len(names)
        names.extend(answer["names"])
        mine = []
        for track in answer["tracks"]:
            if track["kind"] not in kinds:
                continue
            rows = [{**row, "events": {**row["events"], "name": (np.asarray(
                row["events"]["name"], dtype=np.int64) + shift).tolist()}}
                for row in track["rows"]]
            mine.append(len(tracks))
            tracks.append({**track, "id": len(tracks), "rows": rows, "lane": lane,
                           "worker": worker, "rank": rank,
                           "process": f"rank {rank} · {track['process']}"})
        lane_tracks.append(mine)
    return {"names": names, "tracks": tracks, "lane_tracks": lane_tracks}


def collective_links(keyed: pd.DataFrame, workers: list[str], chosen: list[str],
                     offsets: dict[str, float], start_us: float, end_us: float
                     ) -> dict[str, Any]:
    """Matched collectives seen on at least two chosen ranks and overlapping the window (run
    clock), at most MAX_LINKS (an even sample): per collective its id and name, and per
    (collective, lane) the rank's span relative to `start_us` (us)."""
    empty: dict[str, Any] = {"total": 0, "capped": False, "limit": MAX_LINKS, "id": [],
                             "name": [], "item_collective": [], "item_lane": [],
                             "item_start": [], "item_end": []}
    if len(keyed) == 0:
        return empty
    lane_of = np.full(len(workers), -1, dtype=np.int64)
    shift = np.zeros(len(workers))
    for lane, w in enumerate(chosen):
        lane_of[workers.index(w)] = lane
        shift[workers.index(w)] = offsets[w]
    w_index = keyed["w"].to_numpy(np.int64)
    calls = keyed[(lane_of[w_index] >= 0) & keyed["matched"].astype(bool).to_numpy()]
    w_index = calls["w"].to_numpy(np.int64)
    frame = pd.DataFrame({"id": calls["id"].to_numpy(np.int64), "name": calls["name"].to_numpy(),
                          "lane": lane_of[w_index],
                          "start": calls["arrive_at"].to_numpy(np.float64) - shift[w_index],
                          "end": calls["end_at"].to_numpy(np.float64) - shift[w_index]})
    per = frame.groupby("id").agg(lanes=("lane", "nunique"), lo=("start", "min"),
                                  hi=("end", "max"))
    keep = per.index[(per["lanes"] >= 2) & (per["hi"] >= start_us) & (per["lo"] <= end_us)]
    keep = np.sort(keep.to_numpy(np.int64))
    total = int(keep.size)
    if total > MAX_LINKS:
        keep = keep[np.linspace(0, total - 1, MAX_LINKS).astype(np.int64)]
    frame = frame[frame["id"].isin(keep)].sort_values(["id", "lane"])  # one call per (id, lane)
    first = frame.drop_duplicates("id")
    position = np.searchsorted(first["id"].to_numpy(), frame["id"].to_numpy())
    return {**empty, "total": total, "capped": total > MAX_LINKS,
            "id": first["id"].tolist(), "name": [str(n) for n in first["name"]],
            "item_collective": position.tolist(), "item_lane": frame["lane"].tolist(),
            "item_start": np.round(frame["start"].to_numpy() - start_us, 3).tolist(),
            "item_end": np.round(frame["end"].to_numpy() - start_us, 3).tolist()}


def comm_track(table: TraceTable, tracks: list[dict[str, Any]]) -> int:
    """Of a lane's tracks, the id of the GPU stream running most of the rank's communication
    kernels, else its first track (-1 without tracks)."""
    if not tracks:
        return -1
    events = table.events
    mask = np.asarray(comm_kernel_mask(events), dtype=bool)
    if mask.any():
        counts = events.loc[mask, ["pid", "tid"]].astype(str).value_counts()
        by_thread = {(t["pid"], t["tid"]): t["id"] for t in tracks}
        for pid, tid in counts.index:  # most kernels first
            if (pid, tid) in by_thread:
                return int(by_thread[(pid, tid)])
    return int(tracks[0]["id"])


def link_flows(links: dict[str, Any], anchors: list[int]) -> dict[str, Any]:
    """The links as timeline flows (so the trace painter draws them): per collective, an arrow
    from each lane's end to the next lane's end, on each lane's anchor track (`comm_track`)."""
    collective = np.asarray(links["item_collective"], dtype=np.int64)
    lane = np.asarray(links["item_lane"], dtype=np.int64)
    end = np.asarray(links["item_end"], dtype=np.float64)
    track = np.asarray(anchors or [-1], dtype=np.int64)[lane] \
        if lane.size else np.empty(0, dtype=np.int64)
    pair = np.flatnonzero((collective[1:] == collective[:-1]) & (track[1:] >= 0)
                          & (track[:-1] >= 0)) if lane.size else np.empty(0, dtype=np.int64)
    n = int(pair.size)
    zeros, minus = [0] * n, [-1] * n
    return {"total": n, "capped": bool(links["capped"]), "limit": MAX_LINKS, "crossing": 0,
            "cats": [LINK_CAT], "cat": zeros, "from_track": track[pair].tolist(),
            "from_depth": zeros, "from_ts": end[pair].tolist(), "from_id": minus,
            "to_track": track[pair + 1].tolist(), "to_depth": zeros,
            "to_ts": end[pair + 1].tolist(), "to_id": minus}
