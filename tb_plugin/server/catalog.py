"""The server's catalogue of the logdir: runs, workers, spans and the load state of every file.

A scan thread runs the scanner (`discovery.RunScanner`) every `RESCAN_S` seconds (and sooner when
`/runs` is polled), picking up new runs, new files in known runs, and files whose identity
(size, mtime) changed; those are (re)parsed by the parser pool, whose callbacks update the
files' states. The HTTP-facing lookups and state reports read this catalogue and raise the API's
errors (404 unknown, 202 still loading, 422 broken).

Run, worker and span names are only ever looked up among discovered names: no path is built from
a request. The scanner, the parser pool and the clock are injected (tests give their own).
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from ..cache import TraceCache
from ..discovery import RunInfo
from ..ingest.plain import PlainTable
from ..ingest.schema import LoadState
from ..settings import Settings
from ..span_workers import NoWorkerHasSpan, NoWorkerReadable, quote, span_workers
from ..storage import FileRef
from ..views.tabs import VIEWS, views_of_run
from .errors import BadRequest, NotFound, StillLoading, Unprocessable
from .filestate import (
    LOADING,
    PENDING,
    QUEUED,
    SPAN_STATES,
    USABLE,
    FileState,
    RunEntry,
    Versioned,
    files_progress,
    retry_hint,
)
from .jobs import RUN_PRIORITY, WANTED_PRIORITY
from .listing import RunListing
from .parse_child import peek_summary
from .pool import LoadJob, LoadOutcome, estimate_memory

log = logging.getLogger(__name__)

RESCAN_S = 10.0
MIN_RESCAN_GAP_S = 3.0  # `/runs` polling triggers a rescan at most this often
REMOTE_RESCAN_GAP_S = 15.0  # ... and less often on object stores (listings cost requests)
FIRST_SCAN_WAIT_S = 10.0  # lookups wait this long for the first scan before saying 404
MAX_WANTED = 10_000
#: The parsers of a bulk load store the run-level view summaries (the Distributed view's rank
#: summary) of the files of runs with at least this many trace files; a smaller run's view
#: computes them on first request (a few ranks: under a second), and its load skips them
#: (50 of the 67 ms per file of a 25 KB rank trace, bench/many_runs.py).
RUN_SUMMARIES_MIN_FILES = 16

Scanner = Callable[[str], list[RunInfo]]
Clock = Callable[[], float]
Adopt = Callable[[FileState, PlainTable, dict[str, Any]], None]


class Parser(Protocol):
    """What the catalogue needs of the parser pool (`pool.LoadPool`)."""

    def submit(self, job: LoadJob) -> None: ...

    def bump(self, key: str, priority: int = WANTED_PRIORITY) -> None: ...

    def cancel(self, key: str) -> None: ...

    def close(self) -> None: ...


#: (cache root, on_start(key), on_progress(key, fraction), on_done(outcome)) -> a parser pool.
PoolFactory = Callable[[Path, Callable[[str], None], Callable[[str, float], None],
                        Callable[[LoadOutcome], None]], Parser]


class Catalog:
    """Runs and file states of one logdir, kept current by a scan thread and a parser pool.

    `forget(state)` is called for files that changed or vanished (their tables are stale);
    `adopt(state, table, summary)` for a table a parser just made, before the file is
    reported parsed (the server keeps it and writes the cache).
    """

    def __init__(self, logdir: str, cache: TraceCache, *, scanner: Scanner,
                 pool_factory: PoolFactory, forget: Callable[[FileState], None],
                 adopt: Optional[Adopt] = None, clock: Clock = time.time,
                 config: Settings = Settings()) -> None:
        self.logdir = logdir
        self._cache = cache
        self._config = config  # the server's settings (a file's memory estimate)
        self._scanner, self._pool_factory, self._forget_table = scanner, pool_factory, forget
        self._adopt = adopt
        self._clock = clock
        self._lock = threading.RLock()
        self._runs: dict[str, RunEntry] = {}
        self._files: dict[str, FileState] = {}  # url -> state
        self._by_identity: dict[str, FileState] = {}
        #: identities a request waited for (loaded first) -> priority
        self._wanted: dict[str, int] = {}
        self._first_scan = threading.Event()
        self._rescan = threading.Event()
        self._last_scan = 0.0
        self._last_runs: list[RunInfo] = []
        self._listing = RunListing()  # `/runs` reports kept per run between polls
        self._run_of: dict[str, str] = {}  # file identity -> its run's name
        self._started = False
        self._closed = False
        self._pool: Optional[Parser] = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start scanning and loading in the background (idempotent, cheap)."""
        if self._started:
            return
        with self._lock:
            if self._started:
                return
            self._started = True
            self._pool = self._pool_factory(self._cache.root, self._on_start,
                                            self._on_progress, self._on_done)
            threading.Thread(target=self._scan_loop, name="torch-prof-scan", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._rescan.set()
        if self._pool is not None:
            self._pool.close()

    def wait_first_scan(self, timeout: float) -> bool:
        """Whether the first scan has been applied (waiting up to `timeout` seconds for it)."""
        return self._first_scan.wait(timeout)

    # -- scanning ------------------------------------------------------------------------------

    def request_rescan(self) -> None:
        remote = "://" in self.logdir and not self.logdir.startswith("file://")
        gap = REMOTE_RESCAN_GAP_S if remote else MIN_RESCAN_GAP_S
        if time.monotonic() - self._last_scan >= gap:
            self._rescan.set()

    def _scan_loop(self) -> None:
        while not self._closed:
            self._scan_once()
            self._rescan.wait(RESCAN_S)
            self._rescan.clear()

    def _scan_once(self) -> None:
        self._last_scan = started = time.monotonic()
        try:
            runs = self._scanner(self.logdir) if self.logdir else []
        except Exception:  # an unreachable logdir must not kill the scan thread
            log.exception("torch-prof: scanning %s failed", self.logdir)
            runs = None
        if runs is not None and not self._unchanged(runs):
            try:
                self._apply_scan(runs)
                self._last_runs = runs
            except Exception:
                log.exception("torch-prof: applying the scan of %s failed", self.logdir)
        if not self._first_scan.is_set():
            log.debug("torch-prof timing: first_scan %.3f s (%d runs)",
                      time.monotonic() - started, len(runs or []))
        self._first_scan.set()

    def _unchanged(self, runs: list[RunInfo]) -> bool:
        """Whether the scanner found exactly the runs of the last scan applied (the same
        `RunInfo` objects: `RunScanner` keeps those of folders it did not list again)."""
        last = self._last_runs
        return len(runs) == len(last) and all(map(operator.is_, runs, last))

    def _apply_scan(self, runs: list[RunInfo]) -> None:
        fresh: list[FileState] = []
        big_runs: set[str] = set()  # identities of the files of runs with view summaries
        with self._lock:
            changed_at = self._clock() if self._first_scan.is_set() else None
            files: dict[str, FileState] = {}
            index: dict[str, RunEntry] = {}
            for run in runs:
                workers = {}
                big = sum(map(len, run.workers.values())) >= RUN_SUMMARIES_MIN_FILES
                for worker, spans in run.workers.items():
                    entries = []
                    for span_file in spans:
                        state = self._current_or_new(span_file.ref, changed_at, fresh)
                        if big:
                            big_runs.add(state.identity)
                        state.memory_timeline = span_file.memory_timeline
                        state.memory_snapshot = bool(run.memory_snapshots)
                        files[span_file.ref.url] = state
                        entries.append((span_file.span, state))
                    workers[worker] = entries
                index[run.name] = RunEntry(run.name, workers, list(run.memory_timelines),
                                           list(run.memory_snapshots))
            gone = [f for url, f in self._files.items() if files.get(url) is not f]
            self._runs, self._files = index, files
            self._by_identity = {f.identity: f for f in files.values()}
            self._run_of = {f.identity: run.name for run in index.values() for f in run.files()}
        for state in gone:
            self._forget(state)
        for state in fresh:
            self._schedule(state, state.identity in big_runs)

    def _current_or_new(self, ref: FileRef, changed_at: Optional[float],
                        fresh: list[FileState]) -> FileState:
        old = self._files.get(ref.url)
        identity = ref.identity()
        if old is not None and old.identity == identity:
            return old
        state = FileState(ref, identity, changed_at=changed_at)
        state.growing = old is not None and old.ref.size != ref.size
        fresh.append(state)
        return state

    def _forget(self, state: FileState) -> None:
        if self._pool is not None:
            self._pool.cancel(state.identity)
        self._forget_table(state)

    def _schedule(self, state: FileState, view_summaries: bool = True) -> None:
        """Use the summary cached by an earlier parse of this exact file, else queue a parse
        (with the run-level view summaries for a file of a big run); a cached summary that
        cannot be read costs this file a parse, never the scan."""
        try:
            summary = peek_summary(self._cache, state.ref)
        except Exception:  # noqa: BLE001 - the cache is only a cache
            log.exception("torch-prof: reading the cached summary of %s failed; parsing it",
                          state.ref.url)
            summary = None
        if summary is not None:
            self._on_done(LoadOutcome(state.identity, summary=summary))
        elif self._pool is not None:
            priority = self._wanted.get(state.identity, 0)
            self._pool.submit(LoadJob(state.identity, state.ref,
                                      estimate_memory(state.ref, self._config),
                                      priority=priority, view_summaries=view_summaries))

    # -- pool callbacks (loader thread) --------------------------------------------------------

    def _on_start(self, key: str) -> None:
        with self._lock:
            state = self._by_identity.get(key)
            if state is not None and state.state == QUEUED:
                state.state = LOADING
                self._listing.changed(self._run_of.get(key))

    def _on_progress(self, key: str, fraction: float) -> None:
        with self._lock:
            state = self._by_identity.get(key)
            if state is not None and state.state in PENDING:
                state.state, state.progress = LOADING, max(state.progress, float(fraction))
                state.progress_at = self._clock()
                if state.first_progress is None:
                    state.first_progress = (state.progress_at, state.progress)
                self._listing.changed(self._run_of.get(key))

    def _on_done(self, outcome: LoadOutcome) -> None:
        with self._lock:
            state = self._by_identity.get(outcome.key)
        if state is None:  # the file changed or vanished meanwhile
            return
        if outcome.table is not None and outcome.summary is not None and self._adopt:
            self._adopt(state, outcome.table, outcome.summary)  # before anyone may ask for it
        with self._lock:
            summary = outcome.summary
            if summary is not None and summary.get("state") in SPAN_STATES:
                state.state = summary["state"]
                state.messages = [str(m) for m in summary.get("messages") or []]
                state.events = summary.get("events") if state.state != LoadState.ERROR else None
                state.features = dict(summary.get("features") or {})
                # summaries cached before `cut_off` existed: assume the old grace applies
                state.cut_off = bool(summary.get("cut_off", True))
                state.parsed = True
            else:
                state.state = LoadState.ERROR
                state.messages = [outcome.error or "the file could not be loaded"]
                state.cut_off = False
            state.progress = 1.0
            self._wanted.pop(outcome.key, None)
            self._listing.changed(self._run_of.get(outcome.key))

    # -- state reports -------------------------------------------------------------------------

    def active(self) -> bool:
        """Whether TensorBoard should show the tab: some run is known, or the first scan runs."""
        self.start()
        return not self._first_scan.is_set() or bool(self._runs)

    def loading(self) -> bool:
        if not self._first_scan.is_set():
            return True
        now = self._clock()
        with self._lock:
            return any(f.pending(now) for f in self._files.values())

    def listing(self) -> dict[str, Any]:
        self.start()
        self.request_rescan()
        now = self._clock()
        with self._lock:
            runs = self._listing.listing(self._runs, now)
        loading = not self._first_scan.is_set() or RunListing.loading(runs)
        return {"runs": runs, "loading": loading, "logdir": self.logdir}

    def views(self, run_name: str) -> list[str]:
        run, now = self._run(run_name), self._clock()
        with self._lock:
            reports = [(f, f.report(now)[0]) for f in run.files()]
            usable_runs = self._usable_runs(now)
        usable = [f.predicate_features() for f, state in reports if state in USABLE]
        self._want_many([f for f, state in reports if state in PENDING])  # this run first
        if not usable and any(state in PENDING for _, state in reports):
            raise StillLoading(files_progress(run.files(), now), LOADING,
                               retry_hint(run.files(), now, any_one=True))
        return views_of_run(usable, run.facts(usable_runs))

    def _usable_runs(self, now: float) -> int:
        return self._listing.usable_runs(self._runs, now)

    def workers(self, run_name: str, view_name: str) -> list[str]:
        view = VIEWS.get(view_name)
        if view is None:
            raise BadRequest(f"unknown view {quote(view_name)}; known views: "
                             f"{', '.join(VIEWS)}")
        run, now = self._run(run_name), self._clock()
        names = []
        with self._lock:
            for worker, spans in run.workers.items():
                for _, f in spans:
                    state = f.report(now)[0]
                    if state in PENDING or (state in USABLE and
                                            view.available(f.predicate_features())):
                        names.append(worker)
                        break
        return sorted(names)

    def spans(self, run_name: str, worker: str) -> list[str]:
        spans = self._worker(self._run(run_name), worker)
        self.want(*(f for _, f in spans))  # the selected worker's files first
        return [span for span, _ in spans]

    def status(self, run_name: str, worker: str, span: str) -> dict[str, Any]:
        state = self.file(run_name, worker, span)
        with self._lock:
            reported, messages = state.report(self._clock())
            return {"run": run_name, "worker": worker, "span": span, "state": reported,
                    "messages": messages, "events": state.events,
                    "progress": round(state.progress, 4)}

    # -- files of requests ---------------------------------------------------------------------

    def file(self, run_name: str, worker: str, span: str) -> FileState:
        """The file behind (run, worker, span), whatever its state (404 if unknown)."""
        for name, state in self._worker(self._run(run_name), worker):
            if name == span:
                return state
        raise NotFound(f"unknown span {quote(span)} of worker {quote(worker)}")

    def usable_file(self, run_name: str, worker: str, span: str) -> FileState:
        """The file behind (run, worker, span) once parsed; 202/422 otherwise."""
        return self.usable(self.file(run_name, worker, span), worker, span)

    def usable(self, state: FileState, worker: str, span: str) -> FileState:
        """`state` once parsed; 202 (and parse it first) while pending, 422 if broken."""
        now = self._clock()
        with self._lock:
            reported, messages = state.report(now)
            retry = retry_hint([state], now)
        if reported in PENDING:
            self._want(state.identity)
            raise StillLoading(state.progress, reported, retry)
        if reported == LoadState.ERROR:
            raise Unprocessable(f"worker {quote(worker)} span {quote(span)} could not be "
                                f"read: {messages[0] if messages else 'unknown error'}", messages)
        return state

    def want(self, *states: FileState, priority: int = WANTED_PRIORITY) -> None:
        """Parse these files first if they are pending (several sides of one request)."""
        now = self._clock()
        for state in states:
            with self._lock:
                pending = state.pending(now)
            if pending:
                self._want(state.identity, priority)

    def _want_many(self, states: list[FileState]) -> None:
        """A run-level request waits for these: one file is wanted (handed over), many go
        first in the queue but are written by the parsers (`jobs.RUN_PRIORITY`)."""
        self.want(*states, priority=WANTED_PRIORITY if len(states) == 1 else RUN_PRIORITY)

    def span_files(self, run_name: str, span: str
                   ) -> tuple[dict[str, FileState], dict[str, str]]:
        """The usable files of span `span` of every worker of the run, and the workers left
        out with why (no such span, or broken). 202 while any of them is still loading."""
        run, now = self._run(run_name), self._clock()
        with self._lock:
            found = span_workers(span, ((w, run.span_of(w, span)) for w in sorted(run.workers)),
                                 lambda f: f.report(now))
        if found.pending:
            self._want_many(found.pending)
            raise StillLoading(files_progress([*found.usable.values(), *found.pending], now),
                               LOADING, retry_hint(found.pending, now))
        try:
            return found.require(run_name, span)
        except NoWorkerHasSpan as exc:
            raise NotFound(str(exc)) from None
        except NoWorkerReadable as exc:
            raise Unprocessable(exc.message, exc.details()) from None

    def memory_exports(self, run_name: str) -> list[FileRef]:
        return list(self._run(run_name).memory_timelines)

    def memory_snapshots(self, run_name: str) -> list[FileRef]:
        return list(self._run(run_name).memory_snapshots)

    def is_current(self, state: Versioned) -> bool:
        """Whether `state` is still the current version of its file (one state per identity:
        a version that was forgotten and scanned again is a new one)."""
        with self._lock:
            return state.identity in self._by_identity

    def _want(self, identity: str, priority: int = WANTED_PRIORITY) -> None:
        """Someone is waiting for this file: parse it before the others."""
        with self._lock:
            if len(self._wanted) > MAX_WANTED:  # only a hint: never let it grow without bound
                self._wanted.clear()
            self._wanted[identity] = max(priority, self._wanted.get(identity, 0))
        if self._pool is not None:
            self._pool.bump(identity, priority)

    # -- lookups -------------------------------------------------------------------------------

    def _run(self, name: str) -> RunEntry:
        self.start()
        scanned = self._first_scan.wait(FIRST_SCAN_WAIT_S)
        with self._lock:
            run = self._runs.get(name)
        if run is None and not scanned:  # a slow (remote) logdir: not known yet, not unknown
            raise StillLoading(0.0, LOADING)
        if run is None:
            raise NotFound(f"unknown run {quote(name)}")
        return run

    def _worker(self, run: RunEntry, worker: str) -> list[tuple[str, FileState]]:
        spans = run.workers.get(worker)
        if spans is None:
            raise NotFound(f"unknown worker {quote(worker)} in run {quote(run.name)}")
        return spans
