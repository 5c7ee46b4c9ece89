"""The experiment the Diff view proposes for a baseline worker span.

In order: the same worker's other span (the next one, else the previous one); another worker of
the same run (the same span id when it has it); the other run whose operator names overlap most
with the baseline's (Jaccard: shared names / all names of both; ties by run name). "The next
run" (the old default) compares unrelated models (alexnet vs an AMD trace, -99.9%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Candidate:
    """One usable worker span of the logdir."""

    run: str
    worker: str
    span: str
    operators: frozenset[str] = frozenset()


def pick_experiment(base: Candidate, candidates: Sequence[Candidate]) -> dict[str, Any]:
    """The `/diff/default` payload for `base` among `candidates` (usable spans, catalogue
    order: runs sorted, workers sorted, spans in numeric order)."""
    same_worker = [c for c in candidates if (c.run, c.worker) == (base.run, base.worker)]
    spans = [c.span for c in same_worker]
    if base.span in spans and len(spans) > 1:
        at = spans.index(base.span)
        pick = same_worker[at + 1] if at + 1 < len(spans) else same_worker[at - 1]
        return _answer(pick, "other_span", None,
                       f"span {base.span} vs span {pick.span} of the same worker")
    others = [c for c in candidates if c.run == base.run and c.worker != base.worker]
    if others:
        pick = next((c for c in others if c.span == base.span), others[0])
        return _answer(pick, "other_worker", None,
                       f"worker {base.worker} vs worker {pick.worker} of the same run")
    best: Optional[tuple[float, Candidate]] = None
    for candidate in candidates:
        if candidate.run == base.run:
            continue
        score = similarity(base.operators, candidate.operators)
        if best is None or score > best[0]:
            best = (score, candidate)
    if best is None:
        return {"run": None, "worker": None, "span": None, "reason": "none",
                "similarity": None, "message": "no other trace to compare with"}
    score, pick = best
    return _answer(pick, "similar_run", round(score, 4),
                   f"the run with the most similar operators ({score:.0%} of operator names "
                   "shared)")


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _answer(pick: Candidate, reason: str, score: Optional[float], message: str
            ) -> dict[str, Any]:
    return {"run": pick.run, "worker": pick.worker, "span": pick.span, "reason": reason,
            "similarity": score, "message": message}
