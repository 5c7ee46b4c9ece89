"""The cross-rank tables of the Distributed view, from matched collectives (`dist_match`):
coverage, the collective table, stragglers, bus bandwidth, the arrival-skew heat maps and the
straggler recommendation. Every table is bounded for large runs: the collective table keeps the
`MAX_COLLECTIVE_ROWS` collectives with the largest skew, the straggler table the
`MAX_STRAGGLER_ROWS` ranks imposing the most wait, and the heat maps at most `HEAT_MAX_RANKS`
rank rows and `HEAT_MAX_COLUMNS` collective columns (buckets keep the maximum wait).

Bus bandwidth follows nccl-tests (`doc/PERFORMANCE.md`): algbw = S / t with S the collective's
full buffer (all_gather: the output, n x the rank's input when the trace gives no output size;
the message otherwise) and t the transfer time; busbw = algbw x all_reduce 2(n-1)/n, all_gather,
reduce_scatter and all_to_all (n-1)/n, broadcast, reduce, send and recv 1. A group of one rank,
or a collective seen on one rank only, has no bandwidth.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from ..numbers import round3 as _round
from .groups import link_peak
from .summary import RankSummary

MAX_COLLECTIVE_ROWS = 500
MAX_STRAGGLER_ROWS = 256
HEAT_MAX_RANKS = 128
HEAT_MAX_COLUMNS = 200
MISSING_SHOWN = 32
#: Share of all waiting one rank must impose to be named the straggler.
STRAGGLER_SHARE = 0.5
#: A process group's own straggler is recommended when the group holds this share of all waiting.
GROUP_MATERIAL = 0.1
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0,
    "send": lambda n: 1.0, "recv": lambda n: 1.0,
}


def bus_factor(collective: str, n: int) -> Optional[float]:
    factor = BUS_FACTORS.get(collective)
    return None if factor is None or n <= 1 else factor(n)


def coverage(summaries: dict[str, RankSummary], world: Optional[int]) -> dict[str, Any]:
    """World size from `distributedInfo` vs the ranks present."""
    ranks = sorted({s.rank for s in summaries.values() if s.rank is not None})
    present = len(ranks) if ranks else len(summaries)
    missing = max(0, world - present) if world else 0
    missing_ranks = sorted(set(range(world)) - set(ranks))[:MISSING_SHOWN] if (
        world and ranks and missing) else []
    message = ""
    if missing:
        message = (f"Only {present} of {world} ranks are in this run ({missing} missing): waits, "
                   "last arrivers, stragglers and bandwidth cover the present ranks only, and a "
                   "collective seen on one rank is not split into transfer and wait "
                   "(\"unmatched\").")
    return {"world_size": world, "ranks_present": present, "ranks": ranks,
            "missing": missing, "missing_ranks": missing_ranks, "complete": missing == 0,
            "message": message}


def _size(collective: str, size: float, out_size: float, n: int) -> float:
    if collective == "all_gather":
        return out_size if math.isfinite(out_size) and out_size > 0 else size * n
    return size


def collective_table(matched: pd.DataFrame) -> pd.DataFrame:
    """`matched` with size S, algbw and busbw (GB/s; NaN where none)."""
    table = matched.copy()
    n = table["n"].to_numpy(np.int64)
    size = np.array([_size(c, b, o, k) for c, b, o, k in zip(
        table["collective"], table["bytes"].astype(float), table["out_bytes"].astype(float), n)])
    # seen on more than one rank (so n > 1 too: `match` keeps n >= present), with a transfer
    usable = (table["present"].to_numpy() > 1) & (table["transfer"].to_numpy() > 0)
    usable &= size > 0
    algbw = np.where(usable, size / np.where(usable, table["transfer"], 1.0) / 1e3, np.nan)
    factor = np.array([bus_factor(c, k) or np.nan for c, k in zip(table["collective"], n)])
    table["size"] = size
    table["algbw"] = algbw
    table["busbw"] = algbw * factor
    return table


def collective_rows(workers: list[str], matched: pd.DataFrame,
                    table: Optional[pd.DataFrame] = None) -> dict[str, Any]:
    """One row per logical collective; the `MAX_COLLECTIVE_ROWS` with the largest skew.
    `table`: `collective_table(matched)` when the caller has it."""
    table = collective_table(matched) if table is None else table
    total = len(table)
    if total > MAX_COLLECTIVE_ROWS:
        table = table.nlargest(MAX_COLLECTIVE_ROWS, "skew").sort_values("id")
    rows = []
    for r in table.itertuples(index=False):
        cross = r.present > 1
        rows.append({
            "id": int(r.id), "group": str(r.group), "name": str(r.name),
            "collective": str(r.collective), "seq": int(r.seq), "step": str(r.step) or None,
            "ranks": int(r.present), "group_size": int(r.n), "complete": bool(r.complete),
            "bytes": int(r.size), "dtype": str(r.dtype) or None,
            "last_arriver": workers[int(r.last)] if cross and r.skew > 0 else None,
            "skew_us": _round(r.skew) if cross else None,
            "transfer_us": _round(r.transfer) if r.matched else None,
            "latency_us": _round(r.latency),
            "algbw_gbps": _num(r.algbw), "busbw_gbps": _num(r.busbw),
        })
    return {"total": total, "shown": len(rows), "truncated": total > len(rows), "rows": rows}


def straggler_rows(workers: list[str], keyed: pd.DataFrame,
                   matched: pd.DataFrame) -> dict[str, Any]:
    """Per rank: collectives it shared with others, how often it arrived last (with a skew),
    the wait it imposed on the others then, and its own wait (us)."""
    cross = matched[(matched["present"] > 1) & (matched["skew"] > 0)] if len(matched) else matched
    shared = keyed[keyed["id"].isin(cross["id"])] if len(keyed) else keyed
    n = len(workers)
    waited = np.zeros(n)
    calls = np.zeros(n, dtype=np.int64)
    imposed = np.zeros(n)
    last = np.zeros(n, dtype=np.int64)
    by_kind: list[dict[str, int]] = [{} for _ in range(n)]
    if len(shared):
        own = shared.groupby("w")["wait"].agg(["sum", "size"])
        waited[own.index.to_numpy(np.int64)] = own["sum"].to_numpy()
        calls[own.index.to_numpy(np.int64)] = own["size"].to_numpy()
        per_id = shared.groupby("id")["wait"].sum()
        caused = pd.DataFrame({"last": cross["last"].to_numpy(np.int64),
                               "wait": per_id.reindex(cross["id"]).to_numpy(),
                               "kind": cross["collective"].to_numpy()})
        agg = caused.groupby("last")["wait"].agg(["sum", "size"])
        imposed[agg.index.to_numpy(np.int64)] = agg["sum"].to_numpy()
        last[agg.index.to_numpy(np.int64)] = agg["size"].to_numpy()
        for (w, kind), count in caused.groupby(["last", "kind"]).size().items():
            by_kind[int(w)][str(kind)] = int(count)
    total_wait = float(waited.sum())
    order = np.lexsort((np.arange(n), -imposed))[:MAX_STRAGGLER_ROWS]
    rows = [{"worker": workers[w], "collectives": int(calls[w]), "last": int(last[w]),
             "last_by_collective": by_kind[w], "imposed_wait_us": _round(imposed[w]),
             "imposed_share": _round(imposed[w] / total_wait) if total_wait > 0 else 0.0,
             "waited_us": _round(waited[w])} for w in order]
    return {"total": n, "skewed_collectives": int(len(cross)), "total_wait_us":
            _round(total_wait), "rows": rows}


def bandwidth_rows(matched: pd.DataFrame, devices: list[dict[str, Any]],
                   table: Optional[pd.DataFrame] = None) -> list[dict[str, Any]]:
    """Per collective kind and group size: calls with a bandwidth, bytes, transfer time,
    algbw and busbw (GB/s), and the link's expected peak where the GPU is known."""
    table = collective_table(matched) if table is None else table
    table = table[np.isfinite(table["algbw"].to_numpy(np.float64))] if len(table) else table
    peak = _link_peak(devices)
    rows = []
    for (kind, n), group in table.groupby(["collective", "n"], sort=True):
        size, transfer = float(group["size"].sum()), float(group["transfer"].sum())
        algbw = size / transfer / 1e3
        factor = bus_factor(str(kind), int(n))
        rows.append({"collective": str(kind), "group_size": int(n), "calls": int(len(group)),
                     "bytes": int(size), "transfer_us": _round(transfer),
                     "algbw_gbps": _round(algbw), "bus_factor": _num(factor),
                     "busbw_gbps": _num(None if factor is None else algbw * factor),
                     "peak_gbps": peak})
    return rows


def gpu_names(devices: list[dict[str, Any]]) -> set[str]:
    return {str(g.get("name") or "") for d in devices for g in d.get("gpus") or []}


def _link_peak(devices: list[dict[str, Any]]) -> Optional[float]:
    return link_peak(gpu_names(devices))


def heat_maps(workers: list[str], keyed: pd.DataFrame, matched: pd.DataFrame) -> dict[str, Any]:
    """Each rank's wait (arrival skew, us) per collective and per step; ranks and collectives
    bucketed (maximum per bucket for collectives, sum per step) above the limits."""
    n = len(workers)
    rank_bucket = max(1, math.ceil(n / HEAT_MAX_RANKS))
    rows = [workers[i] if rank_bucket == 1 else
            f"{workers[i]} .. {workers[min(n, i + rank_bucket) - 1]}"
            for i in range(0, n, rank_bucket)]
    cross = matched[matched["present"] > 1] if len(matched) else matched
    columns = cross.sort_values("id") if len(cross) else cross
    col_bucket = max(1, math.ceil(len(columns) / HEAT_MAX_COLUMNS))
    shared = keyed[keyed["id"].isin(columns["id"])] if len(keyed) else keyed
    by_col: dict[str, Any] = {"columns": [], "column_steps": [], "column_bucket": col_bucket,
                              "values": [[None] * 0 for _ in rows]}
    by_step: dict[str, Any] = {"columns": [], "values": [[] for _ in rows]}
    if len(shared):
        position = pd.Series(np.arange(len(columns)), index=columns["id"].to_numpy())
        col = position.reindex(shared["id"]).to_numpy() // col_bucket
        row = shared["w"].to_numpy(np.int64) // rank_bucket
        cells = pd.Series(shared["wait"].to_numpy()).groupby([row, col]).max()
        by_col["values"] = _matrix(cells, len(rows), math.ceil(len(columns) / col_bucket))
        names, seqs = columns["name"].to_numpy(object), columns["seq"].to_numpy(np.int64)

        def label(i: int) -> str:  # only the labels shown (a bucket's first and last)
            return f"{names[i]} #{seqs[i]}"

        by_col["columns"] = [label(i) if col_bucket == 1 else
                             f"{label(i)} .. {label(min(len(columns), i + col_bucket) - 1)}"
                             for i in range(0, len(columns), col_bucket)]
        by_col["column_steps"] = [str(s) for s in columns["step"].to_numpy(object)[::col_bucket]]
        step_names = sorted((str(s) for s in pd.unique(shared["step_name"].to_numpy(object))
                             if s), key=lambda s: (0, int(s), s) if s.isdigit() else (1, 0, s))
        at = pd.Series(np.arange(len(step_names)), index=step_names)
        placed = shared[shared["step_name"].isin(step_names)]
        cells = pd.Series(placed["wait"].to_numpy()).groupby(
            [placed["w"].to_numpy(np.int64) // rank_bucket,
             at.reindex(placed["step_name"]).to_numpy()]).sum()
        by_step = {"columns": step_names,
                   "values": _matrix(cells, len(rows), len(step_names))}
    downsampled = rank_bucket > 1 or col_bucket > 1
    return {"rows": rows, "rank_bucket": rank_bucket, "downsampled": downsampled,
            "note": (f"Downsampled: {rank_bucket} rank(s) per row, {col_bucket} collective(s) "
                     "per column, the largest wait shown." if downsampled else ""),
            "collectives": by_col, "steps": by_step}


def _matrix(cells: pd.Series, rows: int, cols: int) -> list[list[Optional[float]]]:
    grid = np.full((rows, cols), np.nan)
    index = cells.index
    grid[index.get_level_values(0).to_numpy(np.int64),
         index.get_level_values(1).to_numpy(np.int64)] = cells.to_numpy()
    return [[None if not math.isfinite(v) else round(float(v), 3) for v in line]
            for line in grid]


def recommendations(stragglers: dict[str, Any], matched: pd.DataFrame,
                    devices: list[dict[str, Any]], fsdp: bool, *,
                    cover: Optional[dict[str, Any]] = None,
                    groups: Optional[dict[str, Any]] = None) -> list[str]:
    """The straggler named with its evidence, or why there is none; with ranks missing, the
    latest present rank is named and the missing ranks are said to be a possible cause; then
    each process group whose own straggler is not the run's (a TP group's straggler)."""
    rows, total = stragglers["rows"], stragglers["total_wait_us"]
    if not rows or total <= 0:
        return []
    top = rows[0]
    missing = _missing_caveat(cover)
    if top["imposed_share"] < STRAGGLER_SHARE:
        missing = missing.replace(" Of the ranks present it arrived last;", "")
        out = [f"Waiting is spread over the ranks ({total / 1e3:.2f} ms in all); no single rank "
               f"imposes half of it (the most: {_who(top['worker'], devices)}, "
               f"{top['imposed_share']:.0%}).{missing}"]
    else:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(top["last_by_collective"].items()))
        advice = ("With FSDP, a late rank stalls every layer's all-gather prefetch and "
                  "reduce-scatter: compare its forward/backward compute and CPU overhead per "
                  "layer, and check its data and sharding balance." if fsdp else
                  "Look at what it does before these collectives: uneven data or work per "
                  "rank, data loading, host-side stalls, or a slower GPU or link.")
        out = [f"Straggler: {_who(top['worker'], devices)} arrived last at {top['last']} of "
               f"{stragglers['skewed_collectives']} collectives with a skew ({kinds}); the "
               f"other ranks waited {top['imposed_wait_us'] / 1e3:.2f} ms for it, "
               f"{top['imposed_share']:.0%} of all waiting.{missing} {advice}"]
    for row in (groups or {}).get("rows", []):
        material = row["total_wait_us"] >= GROUP_MATERIAL * total
        if row["straggler"] and row["straggler"] != top["worker"] and material:
            out.append(f"Process group {row['group']} ({row['size']} ranks): its straggler is "
                       f"{_who(row['straggler'], devices)}, {row['straggler_share']:.0%} of the "
                       f"group's {row['total_wait_us'] / 1e3:.2f} ms of waiting.")
    return out


def _missing_caveat(cover: Optional[dict[str, Any]]) -> str:
    if not cover or not cover.get("missing"):
        return ""
    shown = ", ".join(str(r) for r in cover.get("missing_ranks") or [])
    return (f" Of the ranks present it arrived last; {cover['missing']} rank(s) are missing "
            f"from the run{f' ({shown})' if shown else ''} and may have arrived later still: "
            "then they are the cause, and the transfer times (and bandwidths) include the "
            "wait for them.")


def _who(worker: str, devices: list[dict[str, Any]]) -> str:
    device = next((d for d in devices if d["worker"] == worker), {})
    return (f"{worker} (rank {_or_unknown(device.get('rank'))}, host {device.get('node')}, "
            f"pid {device.get('pid')})")


def _num(value: Any) -> Optional[float]:
    return None if value is None else _round(value)  # round3: None when not finite




def _or_unknown(value: Any) -> str:
    return "unknown" if value is None else str(value)
