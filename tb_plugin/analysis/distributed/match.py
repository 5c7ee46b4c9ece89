"""Collective matching across ranks, from per-rank summaries (`dist_summary.RankSummary`).

Per process group, a logical collective is keyed (group, name, seq): seq is the process group's
collective sequence number when every call of that group on every rank carries one
(record_param_comms' `Seq`, written by recent PyTorch; its "Sequence number" is autograd's), so
ranks whose profiler windows start at different steps still meet at the same collective; else
it is the call's order (the n-th call of that op name on every member rank), which is right
only when every rank recorded the same window. `modes` says which was used per group.

For each matched collective and rank, the rank's duration `d` is its communication kernels'
span (first kernel start to last kernel end), else its host range. Everyone leaves a collective
together, so the rank that arrived last waited least: `transfer = min d`, each rank's wait (its
arrival skew) is `d - min d`, and the last arriver is the rank with the shortest `d`. This
needs no clock alignment between hosts.

A collective seen on only one rank of a larger group (ranks missing from the run) is
*unmatched*: its time is neither transfer nor wait. Clock offsets for the aligned timeline are
estimated from collective ends, relative to a reference rank (`clock_offsets`).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Optional

import numpy as np
import pandas as pd

from .summary import DEFAULT_GROUP, Calls, RankSummary

_TEXT_CALLS = frozenset(("name", "collective", "group", "dtype", "module"))

KEY = ["group", "name", "seq"]


def call_frame(summaries: dict[str, RankSummary]) -> pd.DataFrame:
    """Every rank's calls, one row each: worker index `w`, call index `call`, the summary's
    call columns, `seq` (n-th call of that name in its group on that rank) and `d` (us)."""
    used = [(w, s) for w, s in enumerate(summaries.values()) if s.calls.name]
    if not used:
        return pd.DataFrame(columns=["w", "call", "group", "name", "collective", "seq", "d",
                                     "by_seq"])
    counts = np.array([len(s.calls.name) for _, s in used])
    columns: dict[str, Any] = {}
    for f in Calls.__struct_fields__:  # one concatenation per column, not a frame per rank
        text = f in _TEXT_CALLS
        parts = [getattr(s.calls, f) if len(getattr(s.calls, f)) == n else
                 [""] * n if text else [np.nan] * n for (_, s), n in zip(used, counts)]
        columns[f] = (np.array(list(chain.from_iterable(parts)), dtype=object) if text else
                      np.fromiter(chain.from_iterable(parts), np.float64, int(counts.sum())))
    calls = pd.DataFrame(columns)
    calls["step"] = calls["step"].astype(np.int64)
    calls["w"] = np.repeat([w for w, _ in used], counts)
    calls["call"] = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    names = list(chain.from_iterable([*s.steps.names, ""] for _, s in used))
    base = np.repeat(np.cumsum([len(s.steps.names) + 1 for _, s in used]), counts)
    step = calls["step"].to_numpy()
    empty = base - 1  # each rank's "" slot
    first = base - np.repeat([len(s.steps.names) + 1 for _, s in used], counts)
    calls["step_name"] = np.asarray(names, dtype=object)[np.where(step >= 0, first + step,
                                                                  empty)]
    order = calls.groupby(["w", "group", "name"], sort=False).cumcount().to_numpy()
    given = calls["seq"].to_numpy(np.float64) if "seq" in calls else np.full(len(calls), np.nan)
    numbered = pd.Series(np.isfinite(given)).groupby(calls["group"].to_numpy()).transform("all")
    calls["by_seq"] = numbered.to_numpy(bool)
    calls["seq"] = np.where(calls["by_seq"], np.nan_to_num(given), order).astype(np.int64)
    device = np.isfinite(calls["dev_start"].to_numpy()) & np.isfinite(calls["dev_end"].to_numpy())
    calls["d"] = np.where(device, calls["dev_end"] - calls["dev_start"],
                          calls["host_end"] - calls["host_start"])
    calls["end_at"] = np.where(device, calls["dev_end"], calls["host_end"])
    calls["arrive_at"] = np.where(device, calls["dev_start"], calls["host_start"])
    return calls


def modes(calls: pd.DataFrame) -> dict[str, str]:
    """Per process group: "sequence" (matched by `Seq`) or "order" (by call order)."""
    if len(calls) == 0:
        return {}
    every = calls.groupby("group", sort=True)["by_seq"].all()
    return {str(g): "sequence" if s else "order" for g, s in every.items()}


def group_sizes(summaries: dict[str, RankSummary]) -> tuple[dict[str, int], Optional[int]]:
    """Process-group sizes from `pg_config`, and the world size (the largest one given)."""
    sizes: dict[str, int] = {}
    world = None
    for summary in summaries.values():
        for group in summary.groups:
            sizes.setdefault(group.name, group.size)
        if summary.world_size is not None:
            world = max(world or 0, summary.world_size)
    return sizes, world


def match(calls: pd.DataFrame, sizes: dict[str, int], world: Optional[int]) -> pd.DataFrame:
    """One row per logical collective (KEY): `present` ranks, group size `n`, `transfer`
    (min d), `skew` (max d - min d), `latency` (max d), `last` (worker index of the shortest
    d, lowest index on ties), `bytes`/`out_bytes` (median over ranks), collective, dtype,
    `step` (of the lowest-index rank's call), `matched` (seen on more than one rank, or the
    group has one rank), `complete` (every member rank present) and `id` (by the lowest-index
    rank that made the call, then by that rank's call order: the index of the same collective
    on another rank does not move it)."""
    if len(calls) == 0:
        return pd.DataFrame(columns=[*KEY, "present", "n", "transfer", "skew", "latency",
                                     "last", "bytes", "out_bytes", "collective", "dtype",
                                     "step", "matched", "complete"])
    # in worker order, so that `first` is the lowest-index rank's call and idxmin's ties go to it
    ordered = calls.sort_values(["w", "call"], kind="stable")
    grouped = ordered.groupby(KEY, sort=False)
    out = grouped.agg(present=("w", "size"), transfer=("d", "min"), latency=("d", "max"),
                      bytes=("bytes", "median"), out_bytes=("out_bytes", "median"),
                      size_arg=("group_size", "max"), collective=("collective", "first"),
                      dtype=("dtype", "first"), step=("step_name", "first"),
                      first_w=("w", "first"), first_call=("call", "first"))
    shortest = ordered.loc[grouped["d"].idxmin().to_numpy()]
    out["last"] = shortest["w"].to_numpy()
    out["skew"] = out["latency"] - out["transfer"]
    out = out.reset_index()
    from_config = out["group"].map(sizes).astype(np.float64)
    default = np.where(out["group"].isin([DEFAULT_GROUP, "0"]) & (world is not None),
                       float(world or 0), np.nan)
    n = out["size_arg"].to_numpy(np.float64)
    n = np.where(np.isfinite(n), n, from_config.to_numpy())
    n = np.where(np.isfinite(n), n, default)
    n = np.where(np.isfinite(n), n, out["present"].to_numpy(np.float64))
    out["n"] = np.maximum(n, out["present"].to_numpy(np.float64)).astype(np.int64)
    out["matched"] = (out["present"] > 1) | (out["n"] <= 1)
    out["complete"] = out["present"] >= out["n"]
    out = out.sort_values(["first_w", "first_call"], kind="stable").reset_index(drop=True)
    out["id"] = np.arange(len(out))
    return out.drop(columns=["size_arg", "first_w", "first_call"])


def with_waits(calls: pd.DataFrame, matched: pd.DataFrame) -> pd.DataFrame:
    """`calls` with the collective's `id`, `transfer`, `matched` and each rank's `wait`."""
    keyed = calls.merge(matched[[*KEY, "id", "transfer", "matched"]], on=KEY, how="left")
    keyed["wait"] = np.where(keyed["matched"], keyed["d"] - keyed["transfer"], np.nan)
    return keyed


def clock_offsets(keyed: pd.DataFrame, workers: int) -> np.ndarray:
    """Per worker: its clock minus the run's clock (us), the run's clock being the *reference*
    worker's (the lowest-index worker of each set of workers linked by shared collectives).

    Everyone leaves a collective together, so its end is one instant on every member's clock.
    From the reference outwards: a collective's end on the run clock is the median over its
    members of known offset of (end - offset); a worker's offset is the median over its
    collectives of known end of (its end - that end); repeated until no worker is added. A
    worker that shares collectives with the reference gets the whole difference of clocks, and
    the reference none: a median over both members of a 2-rank group would have split a 5 ms
    offset into +2.5 / -2.5 ms, blaming the innocent partner. 0 without shared collectives."""
    shared = keyed[keyed["matched"].astype(bool) & keyed.groupby("id")["w"].transform(
        "size").gt(1)]
    offsets = np.zeros(workers)
    if len(shared) == 0:
        return offsets
    ids, w = shared["id"].to_numpy(np.int64), shared["w"].to_numpy(np.int64)
    end = shared["end_at"].to_numpy(np.float64)
    label = np.arange(workers)
    while True:  # connected sets of workers: the lowest index of each is its reference
        lowest = pd.Series(label[w]).groupby(ids).transform("min").to_numpy()
        new = label.copy()
        np.minimum.at(new, w, lowest)
        if np.array_equal(new, label):
            break
        label = new
    known = np.full(workers, np.nan)
    present = np.unique(w)
    known[present[label[present] == present]] = 0.0
    while True:
        mine = np.isfinite(known[w])
        ends = pd.Series(end[mine] - known[w[mine]]).groupby(ids[mine]).median()
        todo = ~mine & np.isin(ids, ends.index.to_numpy())
        if not todo.any():
            break
        delta = end[todo] - ends.reindex(ids[todo]).to_numpy()
        estimate = pd.Series(delta).groupby(w[todo]).median()
        known[estimate.index.to_numpy(np.int64)] = estimate.to_numpy()
    return np.where(np.isfinite(known), known, 0.0)


def matched_ranges(summaries: dict[str, RankSummary], keyed: pd.DataFrame) -> pd.DataFrame:
    """Every rank's call ranges with `real_start` = end - the shortest duration of that range
    (same collective, same range index) over the ranks, and `matched` of its collective."""
    frames = []
    for w, summary in enumerate(summaries.values()):
        r = summary.ranges
        if r.call:
            frames.append(pd.DataFrame({"w": w, "call": r.call, "start": r.start,
                                        "end": r.end}))
    if not frames:
        return pd.DataFrame(columns=["w", "call", "start", "end", "id", "name", "matched",
                                     "real_start"])
    ranges = pd.concat(frames, ignore_index=True)
    ranges = ranges.merge(keyed[["w", "call", "id", "name", "matched"]], on=["w", "call"],
                          how="left")
    ranges["j"] = ranges.groupby(["w", "call"], sort=False).cumcount()
    duration = ranges["end"] - ranges["start"]
    shortest = duration.groupby([ranges["id"], ranges["j"]]).transform("min")
    ranges["real_start"] = ranges["end"] - shortest
    return ranges
