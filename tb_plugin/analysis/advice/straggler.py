"""Root cause across ranks: a straggler named before the symptoms it causes.

`advice_summary(table)` is what one rank contributes (small, cached per file): its distributed
summary (`analysis.distributed.summary`) and its mean step-time breakdown. `run_advice(inputs)`
reads every rank's summary of one span and, through the run-level Distributed view
(`analysis.distributed.run.build_distributed`), finds the rank that imposes the most
communication wait. When the span has at least two ranks and that rank imposes at least
`STRAGGLER_WAIT_SHARE` of all waiting (inclusive, the Distributed view's own rule), the item
`straggler` names it, its lateness (the skew of the collectives it arrived last at, per step)
and why, from its own breakdown: the category (device compute, data loading, host compute,
host stall) in which its mean step exceeds the median rank's most. It is priced by the
run-level what-if engine (`analysis.whatif.ranks`): its fix is the edit `rank:WORKER=0` (its
segments between collectives take the other ranks' median), and the saving is the replay's
predicted saving per step (mean over the ranks) as a share of the replayed step; silent below
`STRAGGLER_MIN_PCT` of it (inclusive: it fires from there). Its evidence is the collective at
which it made the others wait longest in all: the range from the first other rank's arrival to
its own, on the straggler's trace clock (`start_us`, `end_us`), its step and the offset from
that step's start (`evidence_step`, `evidence_offset_us`).

`late_by_step` (in `run_advice`'s answer) names, per step, the rank whose lateness skewed that
step's collectives most (the sum of the skews of the collectives it arrived last at): the rank a
slow step's communication wait (`analysis.variance.steps`) waited for.

`with_run_advice(items, run)` puts it before a worker's own advice (after the profile's own
problems) and silences `communication_not_overlapped`, whose exposed communication is then
mostly that wait (`silences`).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from typing_extensions import TypedDict

from ...ingest.schema import TraceTable
from ..breakdown import compute_breakdown
from ..distributed.run import build_distributed
from ..distributed.summary import RankSummary, summary_builtins
from ..whatif.edits import Edit
from ..whatif.ranks import largest_imposed_wait, matching, replay_run
from .facts import fmt_time, grade, make_item

STRAGGLER_WAIT_SHARE = 0.5
STRAGGLER_MIN_PCT = 5.0
SILENCED = ("communication_not_overlapped",)
PROFILE_RULES = ("startup_captured", "foreign_step_marker")
#: Why a rank is late: the breakdown categories of each reason.
REASONS = {
    "device compute": ("Kernel", "Memcpy", "Memset"),
    "data loading": ("DataLoader",),
    "host compute (CPU operators and runtime calls)": ("CPU Exec", "Runtime"),
    "a host stall (no operator running)": ("Other",),
}


class AdviceSummary(TypedDict):
    """`advice_summary`: what the cache keeps per rank (validated when read back)."""

    rank: RankSummary
    breakdown: dict[str, float]


def advice_summary(table: TraceTable) -> dict[str, Any]:
    """One rank's input to `run_advice`: its distributed summary and mean step breakdown."""
    return {"rank": summary_builtins(table), "breakdown": compute_breakdown(table).average}


def run_advice(inputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run-level advice of one span from its ranks' `advice_summary`s (see the module
    docstring): `{"recommendations": [item], "silences": [ids], "straggler": worker|None,
    "late_by_step": {step: {"worker", "skew_us"}}}`."""
    out: dict[str, Any] = {"recommendations": [], "silences": [], "straggler": None,
                           "late_by_step": {}}
    if len(inputs) < 2:
        return out
    view = build_distributed({w: s["rank"] for w, s in inputs.items()})
    out["late_by_step"] = late_by_step(view["collectives"]["rows"])
    stragglers = view["stragglers"]
    total = stragglers["total_wait_us"]
    if not stragglers["rows"] or total <= 0:
        return out
    top = stragglers["rows"][0]
    share = top["imposed_wait_us"] / total
    item = _item(top, share, view, inputs) if share >= STRAGGLER_WAIT_SHARE else None
    if item is not None:
        out.update(recommendations=[item], silences=list(SILENCED), straggler=top["worker"])
    return out


def late_by_step(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per step, the last arriver with the largest summed skew over its collectives of that
    step (ties: the first worker by name)."""
    sums: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["step"] and row["last_arriver"] and row["skew_us"]:
            by_worker = sums.setdefault(row["step"], {})
            by_worker[row["last_arriver"]] = by_worker.get(row["last_arriver"], 0.0) + float(
                row["skew_us"])
    return {step: {"worker": worker, "skew_us": round(skew, 3)}
            for step, by_worker in sums.items()
            for worker, skew in [max(sorted(by_worker.items()), key=lambda kv: kv[1])]}


def _item(top: dict[str, Any], share: float, view: dict[str, Any],
          inputs: dict[str, dict[str, Any]]) -> Optional[dict[str, Any]]:
    worker = top["worker"]
    steps = max(len(view["steps"]), 1)
    medians = {c: float(np.median([s["breakdown"].get(c, 0.0) for s in inputs.values()]))
               for c in ("Total", *sum(REASONS.values(), ()))}
    if medians["Total"] <= 0:
        return None
    matched = matching({w: s["rank"] for w, s in inputs.items()})
    predicted = replay_run(matched, [Edit("rank", 0.0, name=worker)])
    saving, pct = predicted["saving_us"], predicted["saving_pct"]
    if pct < STRAGGLER_MIN_PCT:
        return None
    evidence = largest_imposed_wait(matched, worker)
    where = (evidence["start_us"], evidence["end_us"]) if evidence else None
    skew = sum(r["skew_us"] or 0.0 for r in view["collectives"]["rows"]
               if r["last_arriver"] == worker) / steps
    device = next((d for d in view["devices"] if d["worker"] == worker), {})
    rank = "" if device.get("rank") is None else f" (rank {device['rank']})"
    return {**make_item(
        "straggler", grade(pct, 10.0, 25.0), f"{worker}{rank} is late at the collectives",
        f"{worker}{rank} arrived last at {top['last']} of "
        f"{view['stragglers']['skewed_collectives']} collectives with a skew, {fmt_time(skew)} "
        "late per step, and the other ranks waited "
        f"{fmt_time(top['imposed_wait_us'])} for it: {share:.0%} of all waiting. "
        f"{_why(worker, inputs[worker]['breakdown'], medians)} Fixing its lateness would save "
        f"each rank {fmt_time(saving)} per step ({pct:.1f}%); communication tuning (buckets, "
        "overlap) cannot, since the others wait for it rather than for the network.",
        "Distributed", pct, "%", (), where, (saving, pct)),
        "evidence_step": evidence["step"] if evidence else None,
        "evidence_offset_us": evidence["offset_us"] if evidence else None,
        "whatif": f"rank:{worker}=0"}


def _why(worker: str, mine: dict[str, float], medians: dict[str, float]) -> str:
    excess = {reason: sum(mine.get(c, 0.0) - medians[c] for c in cats)
              for reason, cats in REASONS.items()}
    reason, us = max(excess.items(), key=lambda kv: kv[1])  # ties: the first in REASONS
    if us <= 0:
        return (f"Its own steps spend no more than the median rank's in compute, data loading "
                f"or the host: look at {worker}'s GPU, link or clock.")
    return (f"Its own step spends {fmt_time(us)} more than the median rank's in {reason}: look "
            f"there on {worker} (uneven data or work per rank, a slower input pipeline).")


def with_run_advice(items: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """A worker's recommendations with the run-level ones first (after the profile's own
    problems) and the ids they silence removed."""
    silenced = set(run["silences"])
    profile = [i for i in items if i["id"] in PROFILE_RULES]
    rest = [i for i in items if i["id"] not in PROFILE_RULES and i["id"] not in silenced]
    return [*profile, *run["recommendations"], *rest]
