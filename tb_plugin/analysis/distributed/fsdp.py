"""FSDP layers of the Distributed view: all-gather and reduce-scatter grouped by module, with
the prefetch overlap per layer, from the ranks' summaries (`dist_summary.Calls.module` and
`compute_overlap`, computed per rank by `dist_modules`).

Per (module, collective): calls over every rank, their time (each call's device span, else host
range: `dist_match`'s `d`), the part of it overlapped by computation on the same rank, and the
exposed rest. `overlap_share = overlap_us / time_us`: for an all-gather, how much of the layer's
parameter gathering the prefetch hid behind computation. Rows in first-seen order (lowest rank,
call order), at most MAX_FSDP_ROWS. Calls of those kinds outside every module event are counted
as unattributed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..numbers import round3 as _round
from .modules import SOURCE_FSDP, SOURCE_NN_MODULE
from .summary import RankSummary

FSDP_KINDS = ("all_gather", "reduce_scatter")
MAX_FSDP_ROWS = 500
#: Below this prefetch overlap share, a layer's all-gather is called poorly hidden.
LOW_OVERLAP = 0.5


def fsdp_layers(summaries: dict[str, RankSummary], calls: pd.DataFrame) -> dict[str, Any]:
    found = {part for s in summaries.values() for part in s.module_source.split(" + ") if part}
    sources = [source for source in (SOURCE_NN_MODULE, SOURCE_FSDP) if source in found]
    out: dict[str, Any] = {"source": " + ".join(sources), "total": 0, "truncated": False,
                           "rows": [], "unattributed_calls": 0, "unattributed_us": 0.0,
                           "note": ""}
    if len(calls) == 0 or "module" not in calls or "compute_overlap" not in calls:
        out["note"] = _NO_MODULES
        return out
    kinds = calls[calls["collective"].isin(FSDP_KINDS)]
    kinds = kinds.assign(module=kinds["module"].fillna("").astype(str))
    attributed = kinds["module"] != ""
    out["unattributed_calls"] = int((~attributed).sum())
    out["unattributed_us"] = _round(kinds.loc[~attributed, "d"].sum())
    rows = kinds[attributed]
    if len(rows) == 0:
        out["note"] = _NO_MODULES if not sources else (
            "No all-gather or reduce-scatter inside a module event.")
        return out
    grouped = rows.groupby(["module", "collective"], sort=False).agg(
        ranks=("w", "nunique"), calls=("w", "size"), bytes=("bytes", "sum"), time=("d", "sum"),
        overlap=("compute_overlap", "sum"))
    out["total"] = len(grouped)
    out["truncated"] = len(grouped) > MAX_FSDP_ROWS
    time = grouped["time"].to_numpy(np.float64)
    overlap = np.minimum(grouped["overlap"].to_numpy(np.float64), time)
    share = np.divide(overlap, time, out=np.zeros_like(time), where=time > 0)
    out["rows"] = [
        {"module": str(module), "collective": str(kind), "ranks": int(r.ranks),
         "calls": int(r.calls), "bytes": int(r.bytes), "time_us": _round(t),
         "overlap_us": _round(o), "exposed_us": _round(t - o), "overlap_share": round(float(s), 4)}
        for (module, kind), r, t, o, s in zip(grouped.index, grouped.itertuples(index=False),
                                              time, overlap, share)][:MAX_FSDP_ROWS]
    return out


def fsdp_advice(layers: dict[str, Any]) -> list[str]:
    """A recommendation when some layers' all-gathers are mostly exposed."""
    gathers = [r for r in layers["rows"] if r["collective"] == "all_gather"]
    poor = [r for r in gathers if r["overlap_share"] < LOW_OVERLAP]
    if not poor:
        return []
    exposed = sum(r["exposed_us"] for r in poor)
    names = ", ".join(r["module"] for r in poor[:5]) + (" ..." if len(poor) > 5 else "")
    return [f"FSDP prefetch: the all-gathers of {len(poor)} of {len(gathers)} layers overlap "
            f"computation for under {LOW_OVERLAP:.0%} of their time ({names}); "
            f"{exposed / 1e3:.2f} ms of all-gather is exposed over all ranks. Consider "
            "forward_prefetch=True and backward_prefetch=BACKWARD_PRE (FSDP1), or explicit "
            "prefetching (FSDP2 set_modules_to_forward_prefetch), and check that "
            "limit_all_gathers / reshard_after_forward do not serialise them."]


_NO_MODULES = ("No module events in the traces: record with with_stack=True (nn.Module "
               "events) or FSDP2 (its record functions name the module) to group all-gathers "
               "and reduce-scatters by layer.")
