"""`/diff/default`: the experiment the Diff view proposes for a baseline (`analysis.diff.pick`),
from the catalogue alone: usable spans and the operator names their parse summaries keep."""

from __future__ import annotations

from typing import Any

from ..analysis.diff.pick import Candidate, pick_experiment
from .filestate import USABLE
from .provider import TraceProvider


def diff_default(provider: TraceProvider, run: str, worker: str, span: str) -> dict[str, Any]:
    base_state = provider.file(run, worker, span)  # 404 for unknown names
    base = Candidate(run, worker, span, _operators(base_state.features))
    candidates = []
    for entry in provider.listing()["runs"]:
        for listed in entry["workers"]:
            for status in listed["spans"]:
                if status["state"] not in USABLE:
                    continue
                state = provider.file(entry["name"], listed["name"], status["span"])
                candidates.append(Candidate(entry["name"], listed["name"], status["span"],
                                            _operators(state.features)))
    return pick_experiment(base, candidates)


def _operators(features: dict[str, Any]) -> frozenset[str]:
    return frozenset(str(name) for name in features.get("operator_names") or ())
