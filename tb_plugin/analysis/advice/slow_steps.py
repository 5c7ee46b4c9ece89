"""The slow-step rule: step time varies and one or more steps are outliers (the variance
section of `analysis.variance.steps`); names the slowest outlier and the cause that grew.

Fires when the step-time CV is at least `CV_PCT` (inclusive) and at least one step is an
outlier (robust z above `variance.steps.Z_THRESHOLD`, strict). Priced by the outliers' excess
over the median step, summed and averaged per step (what the fix of the stalls would save); the
evidence is the longest range of the cause in the slowest outlier.
"""

from __future__ import annotations

from typing import Any, Optional

from .facts import Facts, fmt_time, grade, make_item, steps_saving

CV_PCT = 10.0
URL_DATALOADER = "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"
URL_GC = "https://docs.python.org/3/library/gc.html#gc.freeze"
URL_SYNC = "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution"

_LONGER = " longer than in the median step"
#: Per cause: what grew (a template for the growth) and what to do about it.
_CAUSES = {
    "data_loading": (
        "its DataLoader waited {}" + _LONGER,
        "Look for slow samples (a file read or decode in the Dataset's __getitem__) and load in "
        "background workers (num_workers > 0, persistent_workers=True, a larger "
        "prefetch_factor).", URL_DATALOADER),
    "host_compute": (
        "its host operators ran {}" + _LONGER,
        "Look for work done on some steps only (logging, checkpointing, evaluation, input "
        "shapes that change) and move it out of the step or make it periodic.", None),
    "synchronisation": (
        "its synchronising calls waited {}" + _LONGER,
        "The host blocked on the device longer: remove .item(), .cpu() and synchronize() from "
        "the step, or look at what the device ran before the call.", URL_SYNC),
    "communication": (
        "its collectives waited {}" + _LONGER,
        "Collectives take longer when another rank is late: the Distributed view names the "
        "last arriver of each collective.", None),
    "device": (
        "its device work ran {}" + _LONGER,
        "The device ran more on that step: input shapes or a code path that differ per step.",
        None),
    "host_stall": (
        "it spent {} more than the median step with no operator running",
        "A pause with no operator, no runtime call and no device work: Python's garbage "
        "collector (gc.freeze() after start-up, or gc.disable() with periodic gc.collect()), a "
        "sleep, blocking I/O, or the OS.", URL_GC),
}


def rule_slow_steps(facts: Facts) -> Optional[dict[str, Any]]:
    variance = facts.variance
    if not variance or not variance["outliers"] or variance["cv_pct"] is None:
        return None
    if variance["cv_pct"] < CV_PCT:
        return None
    outliers = variance["outliers"]
    saving = steps_saving(facts, sum(o["excess_us"] for o in outliers))
    if saving is None:
        return None
    top = outliers[0]
    grew, advice, url = _CAUSES[top["cause"]]
    more = (f" {len(outliers) - 1} other step{'s are' if len(outliers) > 2 else ' is'} an "
            "outlier too." if len(outliers) > 1 else "")
    where = (top["start_us"], top["end_us"]) if top["start_us"] is not None else None
    return make_item(
        "slow_step", grade(saving[1], 5.0, 15.0),
        f"Step {top['step']} is {fmt_time(top['excess_us'])} slower than the median",
        f"Step {top['step']} is {fmt_time(top['excess_us'])} slower than the median step "
        f"(robust z {top['z']:.1f}; step-time CV {variance['cv_pct']:.1f}%, flagged from "
        f"{CV_PCT:g}%): {grew.format(fmt_time(top['cause_us']))}.{more} {advice}",
        "Trace", variance["cv_pct"], "%",
        (("Further reading", url),) if url else (), where, saving)
