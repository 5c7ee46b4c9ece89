"""Collective matching across ranks, from per-rank summaries (`dist_summary.RankSummary`).

Per process group, the n-th call of an op name on every member rank is one logical collective
(the traces carry no collective sequence id: record_param_comms' "Sequence number" is the
autograd one), keyed (group, name, seq). For each matched collective and rank, the rank's
duration `d` is its communication kernels' span (first kernel start to last kernel end), else
its host range. Everyone leaves a collective together, so the rank that arrived last waited
least: `transfer = min d`, each rank's wait (its arrival skew) is `d - min d`, and the last
arriver is the rank with the shortest `d`. This needs no clock alignment between hosts.

A collective seen on only one rank of a larger group (ranks missing from the run) is
*unmatched*: its time is neither transfer nor wait. Clock offsets for the aligned timeline are
estimated from collective ends (median over shared collectives of each rank's end minus the
collective's median end).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from .summary import DEFAULT_GROUP, RankSummary

KEY = ["group", "name", "seq"]


def call_frame(summaries: dict[str, RankSummary]) -> pd.DataFrame:
    """Every rank's calls, one row each: worker index `w`, call index `call`, the summary's
    call columns, `seq` (n-th call of that name in its group on that rank) and `d` (us)."""
    frames = []
    for w, summary in enumerate(summaries.values()):
        calls = summary.calls
        if not calls.name:
            continue
        frame = pd.DataFrame({f: getattr(calls, f) for f in calls.__struct_fields__
                              if len(getattr(calls, f)) == len(calls.name)})
        frame["w"] = w
        frame["call"] = np.arange(len(frame))
        names = np.asarray([*summary.steps.names, ""], dtype=object)
        frame["step_name"] = names[np.where(frame["step"] >= 0, frame["step"], len(names) - 1)]
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["w", "call", "group", "name", "collective", "seq", "d"])
    calls = pd.concat(frames, ignore_index=True)
    calls["seq"] = calls.groupby(["w", "group", "name"], sort=False).cumcount()
    device = np.isfinite(calls["dev_start"].to_numpy()) & np.isfinite(calls["dev_end"].to_numpy())
    calls["d"] = np.where(device, calls["dev_end"] - calls["dev_start"],
                          calls["host_end"] - calls["host_start"])
    calls["end_at"] = np.where(device, calls["dev_end"], calls["host_end"])
    calls["arrive_at"] = np.where(device, calls["dev_start"], calls["host_start"])
    return calls


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
    group has one rank), `complete` (every member rank present) and `id` (in the first
    rank's call order)."""
    if len(calls) == 0:
        return pd.DataFrame(columns=[*KEY, "present", "n", "transfer", "skew", "latency",
                                     "last", "bytes", "out_bytes", "collective", "dtype",
                                     "step", "matched", "complete"])
    grouped = calls.groupby(KEY, sort=False)
    out = grouped.agg(present=("w", "size"), transfer=("d", "min"), latency=("d", "max"),
                      bytes=("bytes", "median"), out_bytes=("out_bytes", "median"),
                      size_arg=("group_size", "max"), collective=("collective", "first"),
                      dtype=("dtype", "first"), step=("step_name", "first"),
                      first_w=("w", "min"), first_call=("call", "min"))
    shortest = calls.loc[grouped["d"].idxmin().to_numpy()]
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
    """Per worker: its clock minus the run's (median over its matched collectives of its end
    minus the collective's median end), us; 0 without shared collectives."""
    shared = keyed[keyed["matched"].astype(bool) & keyed.groupby("id")["w"].transform(
        "size").gt(1)]
    offsets = np.zeros(workers)
    if len(shared) == 0:
        return offsets
    delta = shared["end_at"] - shared.groupby("id")["end_at"].transform("median")
    per = delta.groupby(shared["w"]).median()
    offsets[per.index.to_numpy(dtype=np.int64)] = per.to_numpy()
    return offsets


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
