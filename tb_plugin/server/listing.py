"""The `/runs` listing of a big logdir, kept per run between polls.

The UI polls `/runs` every second while files load; with thousands of runs, building every
run's report each time (states, progress, views from the usable files' features) cost the
server more than a second per poll (2,000 runs x 10 files: 1.2-2.0 s), taken from the parsers.
A run's report is kept until the catalogue says one of its files changed (`changed`), or the
catalogue's scan replaced the run; the report of a run with a file whose reported state
depends on the time (a broken or cut-off file that may still be being written,
`FileState.report`) is built anew on every poll.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..views.tabs import RunFacts, views_of_run
from .filestate import LOADING, RunEntry, run_report

#: Run-level view predicates compare `RunFacts.usable_runs` with 2 at most (Diff needs another
#: run); higher counts are told apart by none of them, so they share one kept report
#: (tests/server/test_many_runs.py checks every predicate on both sides of this).
USABLE_RUNS_SEEN = 2


@dataclass
class _Kept:
    run: RunEntry  # the catalogue's entry it was built from
    version: int
    timeless: bool  # no file's reported state depends on the time
    report: dict[str, Any]  # the run's report but for its views
    usable: list[dict[str, Any]]  # the features of its usable files
    facts: Optional[RunFacts] = None  # the facts its views were computed with
    views: Optional[list[str]] = None


class RunListing:
    """Kept run reports; not thread-safe: the catalogue holds its lock around every call."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self._versions: dict[str, int] = {}

    def changed(self, run_name: Optional[str]) -> None:
        """A file of this run changed state: its report is built again."""
        if run_name is not None:
            self._versions[run_name] = self._versions.get(run_name, 0) + 1

    def usable_runs(self, runs: dict[str, RunEntry], now: float) -> int:
        """Runs with at least one usable file."""
        return sum(bool(self._kept_of(run, now).usable) for run in runs.values())

    def listing(self, runs: dict[str, RunEntry], now: float) -> list[dict[str, Any]]:
        """Every run's report (`filestate.run_json`'s), sorted by name."""
        kept = [self._kept_of(run, now) for _, run in sorted(runs.items())]
        usable_runs = min(sum(bool(k.usable) for k in kept), USABLE_RUNS_SEEN)
        for entry in kept:  # the other facts are the run entry's own: kept with it
            if entry.facts is None or entry.facts.usable_runs != usable_runs:
                entry.facts = entry.run.facts(usable_runs)
                entry.views = views_of_run(entry.usable, entry.facts)
        self._kept = {k.run.name: k for k in kept}
        return [{**k.report, "views": k.views} for k in kept]

    def _kept_of(self, run: RunEntry, now: float) -> _Kept:
        version = self._versions.get(run.name, 0)
        kept = self._kept.get(run.name)
        if kept is not None and kept.run is run and kept.version == version and kept.timeless:
            return kept
        report, usable, timeless = run_report(run, now)
        kept = _Kept(run, version, timeless, report, usable)
        self._kept[run.name] = kept
        return kept

    @staticmethod
    def loading(reports: list[dict[str, Any]]) -> bool:
        """Whether any file of these reports is still queued or loading (`run_state`)."""
        return any(r["state"] == LOADING for r in reports)
