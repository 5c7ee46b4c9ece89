"""The server's view of the logdir: runs, workers, spans, and the load state of every file.

A scan thread runs `discover_runs` every `RESCAN_S` seconds (and sooner when `/runs` is polled),
picking up new runs, new files in known runs, and files whose identity (size, mtime) changed;
those are (re)parsed by the `LoadPool`. Only small per-file summaries live here. Parsed tables are
read back from the on-disk cache on demand into a memory-bounded LRU, and view payloads are
computed once per (file identity, route, options) through `TraceCache.payload`, then kept encoded
in a second, smaller LRU (payloads of several files, or of many small variants such as zoomed
ranges, live only there). When a worker span is viewed, its table is read and registered
warmers (the timeline index) run on it in a background thread, so the first Trace request does
not pay for them.

Run, worker and span names are only ever looked up among discovered names: no path is built from
a request.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

from ..cache import TraceCache, default_cache
from ..discovery import RunInfo, discover_runs
from ..storage import FileRef
from ..views.tabs import VIEWS, RunFacts, views_of_run
from .errors import BadRequest, NotFound, StillLoading, Unprocessable
from .memo import MemoryLRU, SingleFlight
from .pool import (
    LoadJob,
    LoadOutcome,
    LoadPool,
    available_memory,
    estimate_memory,
    peek_summary,
)

log = logging.getLogger(__name__)

RESCAN_S = 10.0
MIN_RESCAN_GAP_S = 3.0  # `/runs` polling triggers a rescan at most this often
REMOTE_RESCAN_GAP_S = 15.0  # ... and less often on object stores (listings cost requests)
FIRST_SCAN_WAIT_S = 10.0  # lookups wait this long for the first scan before saying 404
WRITE_GRACE_S = 30.0  # a broken file modified this recently is probably still being written
TABLE_MEMORY_ENV = "TORCH_PROF_TABLE_MEMORY_MB"
DERIVED_FACTOR = 2  # analyses memoise derived data on a table: count it twice
BODY_MEMORY = 64 << 20
WANTED_PRIORITY = 10
WARM_ENV = "TORCH_PROF_WARM"  # "0" disables warming derived data of newly read tables
WARM_QUEUE = 8
WARMED_KEY = "torch-prof-server/warmed"  # in `table.derived`: the warmers have run

Warmer = Callable[[Any], Any]

QUEUED, LOADING = "queued", "loading"
OK, PARTIAL, TRUNCATED, ERROR = "ok", "partial", "truncated", "error"
PENDING = (QUEUED, LOADING)
USABLE = (OK, PARTIAL, TRUNCATED)
SPAN_STATES = (QUEUED, LOADING, OK, PARTIAL, TRUNCATED, ERROR)


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
    parsed: bool = False  # the state comes from the parser (not from a crash or a bug)
    memory_timeline: Optional[FileRef] = None  # the memory-timeline export of this span

    def predicate_features(self) -> dict[str, Any]:
        """The parser's features plus what the scan knows (a paired memory timeline)."""
        return {**self.features, "memory_timeline": self.memory_timeline is not None}

    def report(self, now: float) -> tuple[str, list[str]]:
        """(state, messages) as shown to users: a cut-off file that was just modified is
        reported as still being written (and is re-read when it changes), not as broken."""
        if self.parsed and self.state in (TRUNCATED, ERROR):
            modified = _modified_at(self.ref) or self.changed_at
            if modified is not None and now - modified < WRITE_GRACE_S:
                note = (f"the file was modified {max(0, int(now - modified))} s ago and is "
                        "probably still being written; it is read again when it changes")
                return (LOADING if self.state == ERROR else self.state), [note, *self.messages]
        return self.state, list(self.messages)

    def weight(self) -> int:
        return max(1, self.ref.size)


@dataclass
class RunEntry:
    name: str
    workers: dict[str, list[tuple[str, FileState]]]  # worker -> [(span, file)], spans in order
    memory_timelines: list[FileRef] = field(default_factory=list)

    def files(self) -> Iterator[FileState]:
        for spans in self.workers.values():
            for _, state in spans:
                yield state


class RunStore:
    def __init__(self, logdir: Optional[str], cache: Optional[TraceCache] = None,
                 pool_options: Optional[dict[str, Any]] = None) -> None:
        self.logdir = logdir or ""
        self._cache, self._private_cache = _usable_cache(cache or default_cache())
        self._pool_options = dict(pool_options or {})
        self._lock = threading.RLock()
        self._runs: dict[str, RunEntry] = {}
        self._files: dict[str, FileState] = {}  # url -> state
        self._by_identity: dict[str, FileState] = {}
        self._wanted: set[str] = set()  # identities a request waited for (loaded first)
        self._tables: MemoryLRU[Any] = MemoryLRU(_table_budget())
        self._bodies: MemoryLRU[bytes] = MemoryLRU(BODY_MEMORY)
        self._flight = SingleFlight()
        self._warmers: list[Warmer] = []
        self._warm_queue: queue.Queue[FileState] = queue.Queue(WARM_QUEUE)
        self._warm_pending: set[str] = set()  # identities queued for warming
        self._first_scan = threading.Event()
        self._rescan = threading.Event()
        self._last_scan = 0.0
        self._started = False
        self._closed = False
        self._pool: Optional[LoadPool] = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start scanning and loading in the background (idempotent, cheap)."""
        if self._started:
            return
        with self._lock:
            if self._started:
                return
            self._started = True
            self._pool = LoadPool(self._cache.root, self._on_start, self._on_progress,
                                  self._on_done, **self._pool_options)
            threading.Thread(target=self._scan_loop, name="torch-prof-scan", daemon=True).start()
            threading.Thread(target=self._warm_loop, name="torch-prof-warm", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._rescan.set()
        if self._pool is not None:
            self._pool.close()
        if self._private_cache is not None:
            shutil.rmtree(self._private_cache, ignore_errors=True)

    @property
    def cache_root(self) -> Path:
        return self._cache.root

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
        self._last_scan = time.monotonic()
        try:
            runs = discover_runs(self.logdir) if self.logdir else []
        except Exception:  # an unreachable logdir must not kill the scan thread
            log.exception("torch-prof: scanning %s failed", self.logdir)
            runs = None
        if runs is not None:
            try:
                self._apply_scan(runs)
            except Exception:
                log.exception("torch-prof: applying the scan of %s failed", self.logdir)
        self._first_scan.set()

    def _apply_scan(self, runs: list[RunInfo]) -> None:
        from ..analysis.memory_timeline import matching_timeline

        now, fresh = time.time(), []
        with self._lock:
            changed_at = now if self._first_scan.is_set() else None
            files: dict[str, FileState] = {}
            index: dict[str, RunEntry] = {}
            for run in runs:
                workers = {}
                for worker, spans in run.workers.items():
                    entries = []
                    for span_file in spans:
                        state = self._current_or_new(span_file.ref, changed_at, fresh)
                        state.memory_timeline = matching_timeline(span_file.ref.name,
                                                                  run.memory_timelines)
                        files[span_file.ref.url] = state
                        entries.append((span_file.span, state))
                    workers[worker] = entries
                index[run.name] = RunEntry(run.name, workers, list(run.memory_timelines))
            gone = [f for url, f in self._files.items() if files.get(url) is not f]
            self._runs, self._files = index, files
            self._by_identity = {f.identity: f for f in files.values()}
        for state in gone:
            self._forget(state)
        for state in fresh:
            self._schedule(state)

    def _current_or_new(self, ref: FileRef, changed_at: Optional[float],
                        fresh: list[FileState]) -> FileState:
        old = self._files.get(ref.url)
        identity = ref.identity()
        if old is not None and old.identity == identity:
            return old
        state = FileState(ref, identity, changed_at=changed_at)
        fresh.append(state)
        return state

    def _forget(self, state: FileState) -> None:
        if self._pool is not None:
            self._pool.cancel(state.identity)
        self._tables.discard(state.identity)

    def _schedule(self, state: FileState) -> None:
        """Use the summary cached by an earlier parse of this exact file, else queue a parse."""
        summary = peek_summary(self._cache, state.ref)
        if summary is not None:
            self._on_done(LoadOutcome(state.identity, summary=summary))
        elif self._pool is not None:
            priority = WANTED_PRIORITY if state.identity in self._wanted else 0
            self._pool.submit(LoadJob(state.identity, state.ref, estimate_memory(state.ref),
                                      priority=priority))

    # -- pool callbacks (loader thread) --------------------------------------------------------

    def _on_start(self, key: str) -> None:
        with self._lock:
            state = self._by_identity.get(key)
            if state is not None and state.state == QUEUED:
                state.state = LOADING

    def _on_progress(self, key: str, fraction: float) -> None:
        with self._lock:
            state = self._by_identity.get(key)
            if state is not None and state.state in PENDING:
                state.state, state.progress = LOADING, max(state.progress, float(fraction))

    def _on_done(self, outcome: LoadOutcome) -> None:
        with self._lock:
            state = self._by_identity.get(outcome.key)
            if state is None:  # the file changed or vanished meanwhile
                return
            summary = outcome.summary
            if summary is not None and summary.get("state") in SPAN_STATES:
                state.state = summary["state"]
                state.messages = [str(m) for m in summary.get("messages") or []]
                state.events = summary.get("events") if state.state != ERROR else None
                state.features = dict(summary.get("features") or {})
                state.parsed = True
            else:
                state.state = ERROR
                state.messages = [outcome.error or "the file could not be loaded"]
            state.progress = 1.0
            self._wanted.discard(outcome.key)

    # -- queries -------------------------------------------------------------------------------

    def active(self) -> bool:
        """Whether TensorBoard should show the tab: some run is known, or the first scan runs."""
        self.start()
        return not self._first_scan.is_set() or bool(self._runs)

    def loading(self) -> bool:
        if not self._first_scan.is_set():
            return True
        now = time.time()
        with self._lock:
            return any(f.report(now)[0] in PENDING for f in self._files.values())

    def listing(self) -> dict[str, Any]:
        self.start()
        self.request_rescan()
        now = time.time()
        with self._lock:
            usable_runs = self._usable_runs(now)
            runs = [_run_json(run, now, usable_runs) for _, run in sorted(self._runs.items())]
        return {"runs": runs, "loading": self.loading(), "logdir": self.logdir}

    def views(self, run_name: str) -> list[str]:
        run, now = self._run(run_name), time.time()
        with self._lock:
            reports = [(f, f.report(now)[0]) for f in run.files()]
            usable_runs = self._usable_runs(now)
        usable = [f.predicate_features() for f, state in reports if state in USABLE]
        if not usable and any(state in PENDING for _, state in reports):
            raise StillLoading(_progress(run, now), LOADING)
        return views_of_run(usable, _facts(run, usable_runs))

    def _usable_runs(self, now: float) -> int:
        return sum(any(f.report(now)[0] in USABLE for f in run.files())
                   for run in self._runs.values())

    def workers(self, run_name: str, view_name: str) -> list[str]:
        view = VIEWS.get(view_name)
        if view is None:
            raise BadRequest(f"unknown view {_quote(view_name)}; known views: "
                             f"{', '.join(VIEWS)}")
        run, now = self._run(run_name), time.time()
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
        return [span for span, _ in self._worker(self._run(run_name), worker)]

    def status(self, run_name: str, worker: str, span: str) -> dict[str, Any]:
        state = self._file(run_name, worker, span)
        with self._lock:
            reported, messages = state.report(time.time())
            return {"run": run_name, "worker": worker, "span": span, "state": reported,
                    "messages": messages, "events": state.events,
                    "progress": round(state.progress, 4)}

    def usable_file(self, run_name: str, worker: str, span: str) -> FileState:
        """The file behind (run, worker, span) once parsed; 202/422 otherwise."""
        return self.usable(self.file(run_name, worker, span), worker, span)

    def file(self, run_name: str, worker: str, span: str) -> FileState:
        """The file behind (run, worker, span), whatever its state (404 if unknown)."""
        return self._file(run_name, worker, span)

    def usable(self, state: FileState, worker: str, span: str) -> FileState:
        """`state` once parsed; 202 (and parse it first) while pending, 422 if broken."""
        with self._lock:
            reported, messages = state.report(time.time())
        if reported in PENDING:
            self._want(state.identity)
            raise StillLoading(state.progress, reported)
        if reported == ERROR:
            raise Unprocessable(f"worker {_quote(worker)} span {_quote(span)} could not be "
                                f"read: {messages[0] if messages else 'unknown error'}", messages)
        return state

    def want(self, *states: FileState) -> None:
        """Parse these files first if they are pending (several sides of one request)."""
        now = time.time()
        for state in states:
            with self._lock:
                pending = state.report(now)[0] in PENDING
            if pending:
                self._want(state.identity)

    def span_files(self, run_name: str, span: str
                   ) -> tuple[dict[str, FileState], dict[str, str]]:
        """The usable files of span `span` of every worker of the run, and the workers left
        out with why (no such span, or broken). 202 while any of them is still loading."""
        run, now = self._run(run_name), time.time()
        usable: dict[str, FileState] = {}
        skipped: dict[str, str] = {}
        pending: list[FileState] = []
        with self._lock:
            for worker, spans in sorted(run.workers.items()):
                state = next((f for name, f in spans if name == span), None)
                reported, messages = state.report(now) if state else (None, [])
                if state is None:
                    skipped[worker] = f"the worker has no span {_quote(span)}"
                elif reported in PENDING:
                    pending.append(state)
                elif reported == ERROR:
                    skipped[worker] = messages[0] if messages else "the file could not be read"
                else:
                    usable[worker] = state
        if pending:
            self.want(*pending)
            raise StillLoading(_files_progress([*usable.values(), *pending], now), LOADING)
        if not usable and all("has no span" in why for why in skipped.values()):
            raise NotFound(f"no worker of run {_quote(run_name)} has span {_quote(span)}")
        if not usable:
            raise Unprocessable(f"no worker of span {_quote(span)} could be read",
                                [f"{w}: {why}" for w, why in skipped.items()])
        return usable, skipped

    def memory_exports(self, run_name: str) -> list[FileRef]:
        return list(self._run(run_name).memory_timelines)

    def _want(self, identity: str) -> None:
        """Someone is waiting for this file: parse it before the others."""
        with self._lock:
            if len(self._wanted) > 10_000:  # only a hint: never let it grow without bound
                self._wanted.clear()
            self._wanted.add(identity)
        if self._pool is not None:
            self._pool.bump(identity, WANTED_PRIORITY)

    # -- tables and payloads (request threads) -------------------------------------------------

    def table(self, state: FileState) -> Any:
        """The parsed table: from the LRU, else from the disk cache (once for all callers)."""
        table = self._tables.get(state.identity)
        if table is not None:
            return table
        return self._flight.do(("table", state.identity), lambda: self._read_table(state))

    def payload(self, state: FileState, key: str, compute: Callable[[Any], Any]) -> Any:
        """A view payload, computed once per file version and key (and kept on disk)."""
        return self._flight.do(
            ("payload", state.identity, key),
            lambda: self._cache.payload(state.ref, key, lambda: compute(self.table(state))))

    def body(self, state: FileState, key: str, make: Callable[[], bytes]) -> bytes:
        """An encoded response body, kept in memory (bounded) after the first request."""
        return self.memo_body((state.identity, key), make)

    def memo_body(self, memo_key: tuple, make: Callable[[], bytes]) -> bytes:
        """An encoded body under any key (e.g. the identities of several files)."""
        body = self._bodies.get(memo_key)
        if body is None:
            body = self._flight.do(("body", *memo_key), make)
            self._bodies.put(memo_key, body, len(body))
        return body

    # -- derived data warmed in the background -------------------------------------------------

    def add_warmer(self, warm: Warmer) -> None:
        """Run `warm(table)` in the background on the tables of viewed files (see `warm`). It
        must be idempotent and cheap once done (memoised on the table); `prepare` shares its
        run with requests that need it meanwhile."""
        if os.environ.get(WARM_ENV, "").strip() != "0":
            self._warmers.append(warm)

    def prepare(self, state: FileState, table: Any, warm: Warmer) -> None:
        """Run `warm(table)` now, or wait for the background run of it already under way."""
        self._flight.do(("warm", state.identity, id(table), warm), lambda: warm(table))

    def warm(self, state: FileState) -> None:
        """Someone looks at this file: read its table and run the warmers on it in the
        background (once per table), so that e.g. its first timeline needs no index build.
        Views of several files (Distributed, Diff) do not call this."""
        table = self._tables.peek(state.identity)
        if not self._warmers or (table is not None and table.derived.get(WARMED_KEY)):
            return
        with self._lock:
            if state.identity in self._warm_pending:
                return
            self._warm_pending.add(state.identity)
        try:
            self._warm_queue.put_nowait(state)
        except queue.Full:  # only a head start: requests compute it themselves
            with self._lock:
                self._warm_pending.discard(state.identity)

    def _warm_loop(self) -> None:
        while not self._closed:
            try:
                state = self._warm_queue.get(timeout=1.0)
            except queue.Empty:
                continue
            try:
                self._warm_now(state)
            except Exception:  # a missing cache entry, a bug in a warmer: not fatal
                log.exception("torch-prof: warming %s failed", state.ref.url)
            finally:
                with self._lock:
                    self._warm_pending.discard(state.identity)

    def _warm_now(self, state: FileState) -> None:
        with self._lock:
            current = self._by_identity.get(state.identity) is state
        if self._closed or not current:  # the file changed or vanished meanwhile
            return
        table = self.table(state)
        for warm in list(self._warmers):
            self.prepare(state, table, warm)
        table.derived[WARMED_KEY] = True

    def _read_table(self, state: FileState) -> Any:
        table = self._cache.load_table(state.ref)
        if table is None:  # the cache entry vanished or could not be written: parse here, once
            log.warning("torch-prof: %s is not in the cache; parsing it in the server process",
                        state.ref.url)
            from ..ingest import load_trace

            table = load_trace(state.ref, cache=self._cache)
        self._tables.put(state.identity, table, _table_bytes(table))
        return table

    # -- lookups -------------------------------------------------------------------------------

    def _run(self, name: str) -> RunEntry:
        self.start()
        scanned = self._first_scan.wait(FIRST_SCAN_WAIT_S)
        with self._lock:
            run = self._runs.get(name)
        if run is None and not scanned:  # a slow (remote) logdir: not known yet, not unknown
            raise StillLoading(0.0, LOADING)
        if run is None:
            raise NotFound(f"unknown run {_quote(name)}")
        return run

    def _worker(self, run: RunEntry, worker: str) -> list[tuple[str, FileState]]:
        spans = run.workers.get(worker)
        if spans is None:
            raise NotFound(f"unknown worker {_quote(worker)} in run {_quote(run.name)}")
        return spans

    def _file(self, run_name: str, worker: str, span: str) -> FileState:
        spans = self._worker(self._run(run_name), worker)
        for name, state in spans:
            if name == span:
                return state
        raise NotFound(f"unknown span {_quote(span)} of worker {_quote(worker)}")


# -- helpers -------------------------------------------------------------------------------------


def _facts(run: RunEntry, usable_runs: int) -> RunFacts:
    return RunFacts(usable_runs=usable_runs, memory_exports=len(run.memory_timelines),
                    trace_files=sum(1 for _ in run.files()))


def _run_json(run: RunEntry, now: float, usable_runs: int) -> dict[str, Any]:
    workers, states, usable = [], [], []
    for worker, spans in sorted(run.workers.items()):
        entries = []
        for span, f in spans:
            state, messages = f.report(now)
            states.append(state)
            if state in USABLE:
                usable.append(f.predicate_features())
            entries.append({"span": span, "state": state, "messages": messages,
                            "events": f.events})
        workers.append({"name": worker, "spans": entries})
    return {"name": run.name, "state": _run_state(states), "progress": _progress(run, now),
            "views": views_of_run(usable, _facts(run, usable_runs)), "workers": workers}


def _run_state(states: list[str]) -> str:
    if any(s in PENDING for s in states):
        return "loading"
    if states and all(s == ERROR for s in states):
        return "error"
    if any(s != OK for s in states):
        return "partial"
    return "ready"


def _progress(run: RunEntry, now: float) -> float:
    """Fraction of the run's bytes parsed (files weighted by size)."""
    return _files_progress(run.files(), now)


def _files_progress(files: Iterable[FileState], now: float) -> float:
    done = total = 0.0
    for f in files:
        weight = f.weight()
        total += weight
        done += weight * (f.progress if f.report(now)[0] in PENDING else 1.0)
    return round(done / total, 4) if total else 1.0


def _modified_at(ref: FileRef) -> Optional[float]:
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


def _quote(value: str, limit: int = 120) -> str:
    text = value if len(value) <= limit else value[:limit] + "..."
    return repr(text)


def _table_bytes(table: Any) -> int:
    try:
        size = sum(int(frame.memory_usage(index=True, deep=True).sum())
                   for frame in table.tables().values())
    except Exception:  # an estimate only
        size = 64 << 20
    return size * DERIVED_FACTOR


def _table_budget() -> int:
    configured = os.environ.get(TABLE_MEMORY_ENV, "").strip()
    if configured.isdigit():
        return int(configured) << 20
    available = available_memory() or (8 << 30)
    return max(256 << 20, min(available // 4, 4 << 30))


def _usable_cache(cache: TraceCache) -> tuple[TraceCache, Optional[Path]]:
    """The cache to use, and the private temp dir to remove at exit when one was needed.

    Children hand tables to the server through the cache, so the server always needs one: when
    the user disabled it, or its folder is not writable, a private temp dir is used instead.
    """
    if cache.enabled and _writable(Path(cache.root)):
        return cache, None
    if cache.enabled:
        log.warning("torch-prof: the cache dir %s is not writable; using a temporary one",
                    cache.root)
    private = Path(tempfile.mkdtemp(prefix="torch-prof-cache-"))
    return TraceCache(private), private


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            return True
    except OSError:
        return False
