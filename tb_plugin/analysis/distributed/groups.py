"""Nodes and process groups: which host each rank ran on, and per process group its locality
(intra-node or inter-node), traffic, bus bandwidth against its link's peak, and its own
straggler (a TP group's straggler is not the DP group's).

Nodes come from the trace, never from worker names when the trace can tell: the `hostname`
(`host_name`) key Kineto writes; else, when every rank has a rank number, sees the same number G
of GPUs (`deviceProperties`) and ran on GPU `rank % G` (torchrun's placement: local rank = GPU),
node `rank // G` (`node_source` says "placement"); else the `hostname_pid` worker naming
("worker name"); else the worker itself ("worker": nodes unknown, no locality).

Per group (matched collectives of a `group`): `straggler` is the member that imposed the most
wait on the others at the group's collectives it arrived last at, named when that is at least
`STRAGGLER_SHARE` of the group's waiting.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from .rank import NODE_PROCESS, worker_node_pid
from .summary import RankSummary

MAX_GROUP_ROWS = 256
STRAGGLER_SHARE = 0.5
#: Peak bus bandwidth per direction per GPU of the intra-node link (GB/s), by a substring of
#: the device name, first match wins: NVLink 5 (Blackwell), 4 (H100/H200; H800 is cut to 8
#: links), 3 (A100; A800 8 links), 2 (V100); AMD Infinity Fabric (xGMI) 7 links x 64 GB/s
#: (MI300X, MI325X), x 76.8 GB/s (MI355X).
LINK_PEAK_GBPS = (("GB300", 900.0), ("GB200", 900.0), ("B300", 900.0), ("B200", 900.0),
                  ("B100", 900.0), ("H800", 200.0), ("H200", 450.0), ("H100", 450.0),
                  ("A800", 200.0), ("A100", 300.0), ("V100", 150.0), ("MI355", 537.6),
                  ("MI325", 448.0), ("MI300", 448.0))
#: Inter-node: the traces do not name the NIC; one 400 Gb/s NIC per GPU (NDR InfiniBand or
#: 400 GbE, the common rail design of H100/B200 clusters) is assumed.
NETWORK_PEAK_GBPS = 50.0
NETWORK_LINK = "network (one 400 Gb/s NIC per GPU assumed)"


def nodes(summaries: dict[str, RankSummary]) -> tuple[list[str], str]:
    """Each worker's node (in `summaries` order) and where it comes from: "hostname",
    "placement", "worker name" or "worker"."""
    values = list(summaries.values())
    if values and all(s.hostname for s in values):
        return [str(s.hostname) for s in values], "hostname"
    sizes = {s.visible_gpus for s in values}
    size = sizes.pop() if len(sizes) == 1 else None
    if values and size and all(s.rank is not None and [g.id for g in s.gpus] == [s.rank % size]
                               for s in values):
        return [f"node{int(s.rank) // size}" for s in values], "placement"  # type: ignore
    workers = list(summaries)
    named = [worker_node_pid(w, 0)[0] for w in workers]  # the worker itself when not hostname_pid
    every = bool(workers) and all(NODE_PROCESS.match(w) for w in workers)
    return named, "worker name" if every else "worker"


def link_peak(gpu_names: set[str]) -> Optional[float]:
    peaks = {next((p for key, p in LINK_PEAK_GBPS if key in name), None) for name in gpu_names}
    return peaks.pop() if len(peaks) == 1 else None


def group_rows(workers: list[str], node_of: list[str], known_nodes: bool, keyed: pd.DataFrame,
               table: pd.DataFrame, gpu_names: set[str]) -> dict[str, Any]:
    """Per process group: members, nodes, locality, link and peak, calls, bytes, transfer,
    busbw (nccl-tests, over the group's collectives with a bandwidth), waiting and its
    straggler. `table` is the collective table with size/busbw (`tables._collective_table`)."""
    if len(table) == 0:
        return {"total": 0, "rows": []}
    members = keyed.groupby("group")["w"].unique()
    cross = table[(table["present"] > 1) & (table["skew"] > 0)]
    waits = keyed[keyed["id"].isin(cross["id"])].groupby("id")["wait"].sum()
    caused = pd.DataFrame({"group": cross["group"].to_numpy(),
                           "last": cross["last"].to_numpy(np.int64),
                           "wait": waits.reindex(cross["id"]).to_numpy()})
    totals = caused.groupby("group")["wait"].sum()
    imposed = caused.groupby(["group", "last"])["wait"].sum()
    tops = imposed.groupby(level=0).idxmax() if len(imposed) else pd.Series(dtype=object)
    usable = np.isfinite(table["busbw"].to_numpy(np.float64))
    weighted = pd.DataFrame({"group": table["group"].to_numpy()[usable],
                             "t": table["transfer"].to_numpy(np.float64)[usable],
                             "bt": (table["busbw"] * table["transfer"]).to_numpy()[usable]})
    weighted = weighted.groupby("group")[["t", "bt"]].sum()
    per = table.groupby("group", sort=False).agg(size=("n", "max"), collectives=("id", "size"),
                                                 bytes=("size", "sum"),
                                                 transfer=("transfer", "sum"))
    peak = link_peak(gpu_names)
    rows = []
    for group, agg in zip(per.index, per.itertuples(index=False)):
        ranks = sorted(int(w) for w in members.get(group, []))
        hosts = {node_of[w] for w in ranks}
        intra = len(hosts) == 1
        t, bt = (weighted.loc[group, "t"], weighted.loc[group, "bt"]) if (
            group in weighted.index) else (0.0, 0.0)
        total = float(totals.get(group, 0.0))
        top = int(tops[group][1]) if total > 0 and group in tops.index else None
        share = 0.0 if top is None else float(imposed[(group, top)]) / total
        rows.append({
            "group": str(group), "size": int(agg.size), "ranks_present": len(ranks),
            "workers": [workers[w] for w in ranks[:16]],
            "nodes": len(hosts) if known_nodes else None,
            "locality": (None if not known_nodes else "intra-node" if intra else "inter-node"),
            "link": None if not known_nodes else NETWORK_LINK if not intra else
            _link_name(gpu_names) if peak else None,
            "peak_gbps": (None if not known_nodes else NETWORK_PEAK_GBPS if not intra else peak),
            "collectives": int(agg.collectives), "bytes": int(agg.bytes),
            "transfer_us": _round(float(agg.transfer)),
            "busbw_gbps": _round(bt / t) if t > 0 else None,  # transfer-weighted
            "total_wait_us": _round(total),
            "straggler": workers[top] if top is not None and share >= STRAGGLER_SHARE else None,
            "straggler_share": _round(share),
        })
    rows.sort(key=lambda r: (-r["total_wait_us"], r["group"]))
    return {"total": len(rows), "rows": rows[:MAX_GROUP_ROWS]}


def _link_name(gpu_names: set[str]) -> str:
    return "xGMI (Infinity Fabric)" if any("MI3" in n for n in gpu_names) else "NVLink"


def _round(value: float) -> float:
    return round(float(value), 3)
