"""The load state of every trace file as users see it, and the `/runs` report built from it.

A file's state is `queued` or `loading` until a parser child reports one of the parse outcomes
of `ingest.schema.LoadState` (ok, partial, truncated, error). Only these small records live in
the server for every file; parsed tables are read from the cache when a view needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional, Protocol

from ..ingest.schema import LoadState
from ..storage import FileRef
from ..views.tabs import RunFacts, views_of_run

QUEUED, LOADING = "queued", "loading"  # before the parse outcome: the server's own states
PENDING = (QUEUED, LOADING)
USABLE = (LoadState.OK, LoadState.PARTIAL, LoadState.TRUNCATED)
SPAN_STATES = (*PENDING, *USABLE, LoadState.ERROR)
#: A client waiting for loading files is told to ask again after the estimated rest of their
#: parse, within these bounds (seconds); the upper one while a file is queued, and
#: RETRY_SILENT_S while its parser has not reported progress yet (it does every 0.2 s).
RETRY_MIN_S, RETRY_SILENT_S, RETRY_MAX_S = 0.1, 0.25, 1.0
#: A cut-off file modified this recently, or one whose size changed between scans this recently,
#: is probably still being written. A file that ends in invalid JSON is reported at once.
WRITE_GRACE_S = 30.0


class Versioned(Protocol):
    """One version of a file: what tables, payloads and warm-ups are kept under (a
    `FileState`, or the `provider.TraceFile` the routes get)."""

    @property
    def identity(self) -> str: ...

    @property
    def ref(self) -> FileRef: ...


@dataclass
class FileState:
    """One trace file (one worker span) as of its current identity."""

    ref: FileRef
    identity: str
    changed_at: Optional[float] = None  # wall time a scan saw it appear or change; None at start
    state: str = QUEUED
    messages: list[str] = field(default_factory=list)
    events: Optional[int] = None
    features: dict[str, Any] = field(default_factory=dict)
    progress: float = 0.0
    #: (clock time, fraction) of the parser's first progress report, and the time of its latest
    first_progress: Optional[tuple[float, float]] = None
    progress_at: Optional[float] = None
    parsed: bool = False  # the state comes from the parser (not from a crash or a bug)
    memory_timeline: Optional[FileRef] = None  # the memory-timeline export of this span
    memory_snapshot: bool = False  # the run holds an allocator snapshot
    #: The parse stopped inside a JSON value (`ParseStatus.cut_off`): it may be mid-write.
    cut_off: bool = True
    #: A scan saw this path with another size before (the file is growing).
    growing: bool = False

    def predicate_features(self) -> dict[str, Any]:
        """The parser's features plus what the scan knows (a paired memory timeline, the run's
        allocator snapshots)."""
        return {**self.features, "memory_timeline": self.memory_timeline is not None,
                "memory_snapshot": self.memory_snapshot}

    def report(self, now: float) -> tuple[str, list[str]]:
        """(state, messages) as shown to users: a file that was just modified and either stops
        mid-token or has been growing is reported as still being written (and is re-read when
        it changes), not as broken; a file that ends in invalid JSON is broken at once."""
        may_grow = self.cut_off or self.growing
        if self.parsed and may_grow and self.state in (LoadState.TRUNCATED, LoadState.ERROR):
            modified = modified_at(self.ref) or self.changed_at
            if modified is not None and now - modified < WRITE_GRACE_S:
                note = (f"the file was modified {max(0, int(now - modified))} s ago and is "
                        "probably still being written; it is read again when it changes")
                state = LOADING if self.state == LoadState.ERROR else self.state
                return state, [note, *self.messages]
        return self.state, list(self.messages)

    def pending(self, now: float) -> bool:
        return self.report(now)[0] in PENDING

    def weight(self) -> int:
        return max(1, self.ref.size)


@dataclass
class RunEntry:
    name: str
    workers: dict[str, list[tuple[str, FileState]]]  # worker -> [(span, file)], spans in order
    memory_timelines: list[FileRef] = field(default_factory=list)
    memory_snapshots: list[FileRef] = field(default_factory=list)

    def files(self) -> Iterator[FileState]:
        for spans in self.workers.values():
            for _, state in spans:
                yield state

    def span_of(self, worker: str, span: str) -> Optional[FileState]:
        return next((f for name, f in self.workers.get(worker, []) if name == span), None)

    def facts(self, usable_runs: int) -> RunFacts:
        return RunFacts(usable_runs=usable_runs, memory_exports=len(self.memory_timelines),
                        memory_snapshots=len(self.memory_snapshots),
                        trace_files=sum(1 for _ in self.files()))


def run_json(run: RunEntry, now: float, usable_runs: int) -> dict[str, Any]:
    """One run of the `/runs` listing: its state, progress, views and every span's state,
    built from scratch (the server keeps these reports between polls, `listing.RunListing`)."""
    report, usable, _ = run_report(run, now)
    return {**report, "views": views_of_run(usable, run.facts(usable_runs))}


def run_report(run: RunEntry, now: float) -> tuple[dict[str, Any], list[Any], bool]:
    """A run's report without its views (`views`: None), the predicate features of its usable
    files, and whether the report stays true as time passes (no file's state depends on the
    clock: a cut-off or growing file that failed is re-judged when its write grace ends)."""
    workers, states, usable = [], [], []
    timeless = True
    for worker, spans in sorted(run.workers.items()):
        entries = []
        for span, f in spans:
            state, messages = f.report(now)
            states.append(state)
            if state in USABLE:
                usable.append(f.predicate_features())
            timeless &= not (f.parsed and (f.cut_off or f.growing) and
                             f.state in (LoadState.TRUNCATED, LoadState.ERROR))
            entries.append({"span": span, "state": state, "messages": messages,
                            "events": f.events,
                            "memory_timeline": f.memory_timeline is not None})
        workers.append({"name": worker, "spans": entries})
    report = {"name": run.name, "state": run_state(states),
              "progress": files_progress(run.files(), now), "views": None, "workers": workers}
    return report, usable, timeless


def run_state(states: list[str]) -> str:
    if any(s in PENDING for s in states):
        return "loading"
    if states and all(s == LoadState.ERROR for s in states):
        return "error"
    if any(s != LoadState.OK for s in states):
        return "partial"
    return "ready"


def files_progress(files: Iterable[FileState], now: float) -> float:
    """Fraction of these files' bytes parsed (files weighted by size)."""
    done = total = 0.0
    for f in files:
        weight = f.weight()
        total += weight
        done += weight * (f.progress if f.pending(now) else 1.0)
    return round(done / total, 4) if total else 1.0


def retry_hint(files: Iterable[FileState], now: float, *, any_one: bool = False) -> float:
    """Seconds a client waiting for all of `files` (for any one of them: `any_one`) should
    wait before asking again: the longest (shortest) estimated rest of a pending file's parse,
    within [RETRY_MIN_S, RETRY_MAX_S]. The rest is what is left at the rate between the
    parser's first and latest progress reports (the parser's start-up is not in it), less the
    time since the latest: (1 - p) * (t - t1) / (p - p1) - (now - t). RETRY_SILENT_S for a
    file being parsed with fewer than two reports; RETRY_MAX_S for a file queued, or pending
    only because it is still being written (it is parsed again when it changes, not soon)."""
    rests = [_rest(f, now) for f in files if f.pending(now)]
    if not rests:
        return RETRY_MIN_S
    rest = min(rests) if any_one else max(rests)
    return min(RETRY_MAX_S, max(RETRY_MIN_S, rest))


def _rest(f: FileState, now: float) -> float:
    if f.state != LOADING:
        return RETRY_MAX_S
    if f.first_progress is not None and f.progress_at is not None:
        first_at, first = f.first_progress
        if f.progress > first and f.progress_at > first_at:
            rate = (f.progress - first) / (f.progress_at - first_at)
            return (1.0 - f.progress) / rate - (now - f.progress_at)
    return RETRY_SILENT_S


def modified_at(ref: FileRef) -> Optional[float]:
    """The file's mtime in seconds since the epoch, from what its filesystem reports."""
    text = str(ref.mtime or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if value > 1e17:  # nanoseconds (local st_mtime_ns)
        return value / 1e9
    if value > 1e14:  # microseconds
        return value / 1e6
    if value > 1e11:  # milliseconds
        return value / 1e3
    return value
