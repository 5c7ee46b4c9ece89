"""Schedule the parsing of trace files in child processes, a few at a time (server side).

A child (`parse_child.py`) parses one file and sends back a small summary (state, messages,
feature counts) and the table as plain arrays; the catalogue hands the table to the server's
table memory, which writes it to the `TraceCache` in the background. That is for a file
someone waits for; the files of a bulk load, and a file too big to hand over, are written to
the cache by the child itself (`parse_store.parse_into_cache`, see `hands_over`), the small
ones of a bulk load in batches (`parse_store.parse_batch_into_cache`: one call for up to 64
files, `jobs.JobQueue.small_batch`; a batch whose parser dies is queued again file by
file). The
executor comes from `executors.make_executor`: local processes, or with
`$TORCH_PROF_CLUSTER` a Ray cluster whose tasks (`parse_into_cache` too) write the table to
the shared cache and send back only the summary (the cluster schedules them by its own CPUs
and memory). How many
files are parsed at once is bounded by the cores and by a memory budget (each file's peak is
estimated from its size), and one file is always allowed to run, however big. The children are
`workers.WorkerPool` processes, which import only the parser (not TensorBoard, not the views),
and the pool is shut down when idle, so an idle server holds no parser processes. The knobs
come from `tb_plugin.settings`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import CancelledError, Executor, Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Optional

from ..executors import CLUSTER_IN_FLIGHT, ClusterError, is_remote, make_executor
from ..ingest.sizing import peak_memory
from ..settings import (
    LOAD_WORKERS_ENV,
    Settings,
    available_memory,
    settings,
    usable_cpus,
)
from ..storage import FileRef
from ..workers import WorkerDied, WorkerPool
from .jobs import (
    BASE_MEMORY,
    TABLE_MIN_JSON_BYTES,
    WANTED_PRIORITY,
    JobQueue,
    LoadJob,
    LoadOutcome,
)
from .parse_child import HANDOVER_MAX_JSON_BYTES, ParsedFile, init_child, parse_file
from .parse_store import parse_batch_into_cache, parse_into_cache

log = logging.getLogger(__name__)

IDLE_SHUTDOWN_S = 60.0
#: A file for which no parser process could be started this many times gets that error (no
#: interpreter, no processes left) instead of staying queued.
START_ATTEMPTS = 2
PROGRESS_INTERVAL_S = 0.25


# -- sizing --------------------------------------------------------------------------------------


def default_memory_budget(config: Settings) -> int:
    if config.load_memory:
        return config.load_memory
    available = available_memory()
    return available // 2 if available else 4 << 30


def default_workers(config: Settings, budget: int) -> int:
    if config.load_workers:
        return config.load_workers
    return max(1, min(usable_cpus(), budget // BASE_MEMORY, 8))


def estimate_memory(ref: FileRef, config: Settings) -> int:
    """A parser's peak memory for this file (`ingest.sizing.peak_memory`: the interpreter plus
    the JSON size, a local gzip file's from its trailer, capped by the inflation limit of
    `config`)."""
    return peak_memory(ref, config.max_inflate_ratio)


# -- the pool ----------------------------------------------------------------------------------


class LoadPool:
    """A priority queue of files (`jobs.JobQueue`) in front of the parser processes (a
    `workers.WorkerPool`, or a Ray cluster's executor), run by one thread.

    Callbacks (`on_start(key)`, `on_progress(key, fraction)`, `on_done(outcome)`) are called
    from the pool's thread and must be quick.
    """

    def __init__(
        self,
        cache_root: Path,
        on_start: Callable[[str], None],
        on_progress: Callable[[str, float], None],
        on_done: Callable[[LoadOutcome], None],
        *,
        workers: Optional[int] = None,
        memory_budget: Optional[int] = None,
        idle_shutdown_s: float = IDLE_SHUTDOWN_S,
        config: Optional[Settings] = None,
    ) -> None:
        config = config or settings()
        self.cache_root = cache_root
        self.memory_budget = memory_budget or default_memory_budget(config)
        self.workers = workers or default_workers(config, self.memory_budget)
        self.idle_shutdown_s = idle_shutdown_s
        # Processes a file parsed alone may use (the parser splits a big local file in parts).
        self.split = max(1, min(self.workers, config.parse_processes or usable_cpus()))
        self.config = config
        if config.cluster:  # a Ray cluster schedules by its own CPUs and memory
            self.workers = workers or config.load_workers or CLUSTER_IN_FLIGHT
            self.memory_budget = 1 << 62
            self.split = 1  # a Ray task holds one CPU of its node: no split parse there
        self._on_start, self._on_progress, self._on_done = on_start, on_progress, on_done
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._queue = JobQueue()
        self._running: dict[int, LoadJob] = {}
        self._done: deque[tuple[LoadJob, Future]] = deque()
        self._executor: Optional[Executor] = None
        self._progress_queue: queue.SimpleQueue = queue.SimpleQueue()
        self._broken = False
        self._idle_since = time.monotonic()
        self._closed = False
        self.parser_calls = 0  # calls made to parser processes (a batch is one)
        self._thread = threading.Thread(target=self._run, name="torch-prof-loader", daemon=True)
        self._thread.start()
        log.info("torch-prof: parsing up to %d files at once (memory budget %d MB, %s)",
                 self.workers, self.memory_budget >> 20, config.cluster or "local processes")

    # -- public API (any thread) ---------------------------------------------------------------

    def submit(self, job: LoadJob) -> None:
        with self._lock:
            self._queue.push(job)
        self._wake.set()

    def bump(self, key: str, priority: int = WANTED_PRIORITY) -> None:
        """Move a queued file ahead: someone is waiting for it."""
        with self._lock:
            if not self._queue.bump(key, priority):
                return
        self._wake.set()

    def cancel(self, key: str) -> None:
        """Forget a queued file (it changed or vanished); a running parse just finishes."""
        with self._lock:
            self._queue.remove(key)

    def close(self) -> None:
        """Stop now: drop the queue and kill running parsers (used at server exit)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            executor, self._executor = self._executor, None
        self._wake.set()
        if executor is not None:
            _kill(executor)

    # -- the pool thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            try:
                self._drain_progress()
                self._collect()
                self._dispatch()
                self._shutdown_if_idle()
            except Exception:  # the loader thread must survive any bug
                log.exception("torch-prof loader loop failed")
            self._wake.wait(PROGRESS_INTERVAL_S if self._running else 2.0)
            self._wake.clear()

    def _processes_for(self, job: LoadJob) -> int:
        """A file parsed alone may use every parser slot (the parser splits big local files in
        parts), so one huge trace still uses all cores; otherwise one process per file."""
        alone = not self._running and len(self._queue) == 1
        return self.split if alone else 1

    def _dispatch(self) -> None:
        started, failed = [], []
        with self._lock:
            while not self._closed and not self._broken:
                job = self._queue.peek()
                if job is None or not admits(job, self._running.values(), self.workers,
                                             self.memory_budget):
                    break
                processes = self._processes_for(job)
                try:
                    executor = self._executor_or_new()
                    remote = is_remote(executor)
                    batch = [] if remote else self._queue.small_batch()
                    if len(batch) > 1:
                        future = executor.submit(parse_batch_into_cache, [
                            (j.key, j.ref, j.view_summaries,
                             j.estimate - BASE_MEMORY >= TABLE_MIN_JSON_BYTES)
                            for j in batch], str(self.cache_root), self.config)
                    elif hands_over(job, len(self._queue) - 1, remote):
                        future = executor.submit(parse_file, job.key, job.ref,
                                                 str(self.cache_root), processes, self.config)
                    else:
                        future = executor.submit(parse_into_cache, job.key, job.ref,
                                                 str(self.cache_root), processes,
                                                 job.view_summaries, self.config)
                    self.parser_calls += 1
                except (BrokenProcessPool, RuntimeError) as exc:  # broken, or interpreter exit
                    log.warning("torch-prof: cannot start a parser process: %s", exc)
                    self._broken = True
                    if isinstance(exc, WorkerDied) and exc.exitcode is None:  # none started
                        job.start_failures += 1
                        if job.start_failures >= START_ATTEMPTS:
                            self._queue.pop()
                            failed.append(LoadOutcome(job.key, error=str(exc)))
                    break
                if len(batch) > 1:
                    job = self._queue.take_batch(batch)
                    self._running[job.token] = job
                    future.add_done_callback(lambda f, j=job: self._finished(j, f))
                    started += [j.key for j in batch]
                    continue
                self._queue.pop()
                job.submitted_at = time.time()
                if processes > 1:
                    job.processes = processes
                    job.estimate += (processes - 1) * BASE_MEMORY
                self._running[job.token] = job
                future.add_done_callback(lambda f, j=job: self._finished(j, f))
                started.append(job.key)
        for key in started:
            self._on_start(key)
        for outcome in failed:
            self._on_done(outcome)

    def _finished(self, job: LoadJob, future: Future) -> None:
        self._done.append((job, future))
        self._wake.set()

    def _collect(self) -> None:
        while self._done:
            job, future = self._done.popleft()
            with self._lock:
                self._running.pop(job.token, None)
                if not self._running:
                    self._idle_since = time.monotonic()
            for outcome in (self._batch_outcomes(job, future) if job.batch
                            else [self._outcome(job, future)]):
                if outcome is not None:
                    self._on_done(outcome)
        if self._broken and not self._running:
            self._replace_broken_executor()

    def _outcome(self, job: LoadJob, future: Future) -> Optional[LoadOutcome]:
        try:
            parsed: ParsedFile | dict[str, Any] = future.result()
            if isinstance(parsed, dict):  # from parse_into_cache: the table is in the cache
                return LoadOutcome(job.key, summary=parsed)
            log.debug("torch-prof timing: pool_start %.3f s (%s)",
                      parsed.started_at - job.submitted_at, job.ref.url)
            log.debug("torch-prof timing: parse %.3f s (%s, %d processes; summary %.3f s)",
                      parsed.parse_s, job.ref.url, job.processes, parsed.summary_s)
            log.debug("torch-prof timing: handover %.3f s (%s)",
                      time.time() - parsed.started_at - parsed.parse_s - parsed.summary_s,
                      job.ref.url)
            return LoadOutcome(job.key, summary=parsed.summary, table=parsed.table)
        except CancelledError:
            return None
        except ClusterError as exc:  # unreachable cluster, or its worker died on every retry
            return LoadOutcome(job.key, error=str(exc))
        except BrokenProcessPool as exc:
            self._broken = True
            if job.attempts == 0:  # maybe another file's crash: retry it alone
                job.attempts, job.solo = 1, True
                job.processes, job.estimate = 1, estimate_memory(job.ref, self.config)
                self.submit(job)
                return None
            return LoadOutcome(job.key, error=death_message(getattr(exc, "exitcode", None)))
        except Exception as exc:
            log.exception("loading %s failed", job.ref.url)
            return LoadOutcome(job.key, error=f"internal error while loading "
                               f"({type(exc).__name__}: {exc}); please report it")

    def _batch_outcomes(self, lead: LoadJob, future: Future) -> list[LoadOutcome]:
        """The outcome of each file of a batch (`parse_batch_into_cache` reports each file's
        error apart). When the parser process died, each file is queued again on its own (the
        usual retry then names the file that kills its parser)."""
        try:
            results = future.result()
        except CancelledError:
            return []
        except BrokenProcessPool:
            self._broken = True
            for job in lead.batch:
                job.alone = True
                self.submit(job)
            return []
        except Exception as exc:  # noqa: BLE001 - a bug in the batch call: each file says so
            log.exception("loading a batch of %d files failed", len(lead.batch))
            message = (f"internal error while loading ({type(exc).__name__}: {exc}); "
                       "please report it")
            return [LoadOutcome(job.key, error=message) for job in lead.batch]
        return [LoadOutcome(key, summary=summary, error=error)
                for key, summary, error in results]

    def _replace_broken_executor(self) -> None:
        with self._lock:
            executor, self._executor, self._broken = self._executor, None, False
        if executor is not None:
            _kill(executor)

    def _executor_or_new(self) -> Executor:
        if self._executor is None:
            self._executor = make_executor(  # local processes, or the Ray cluster configured
                self.config, max_workers=self.workers,
                initializer=init_child, initargs=(self._progress_queue,))
        return self._executor

    def _drain_progress(self) -> None:
        for _ in range(10_000):
            try:
                key, fraction = self._progress_queue.get_nowait()
            except queue.Empty:
                return
            self._on_progress(key, fraction)

    def _shutdown_if_idle(self) -> None:
        with self._lock:
            idle = (self._executor is not None and not self._running and not self._queue
                    and time.monotonic() - self._idle_since > self.idle_shutdown_s)
            executor = self._executor if idle else None
            if idle:
                self._executor = None
        if executor is not None:
            executor.shutdown(wait=True)  # idle: the children exit at once


def hands_over(job: LoadJob, queued_after: int, remote: bool) -> bool:
    """Whether the parser hands the table to the server (`parse_file`: no disk round-trip
    before the first view) or writes it and its view summaries to the cache itself
    (`parse_into_cache`). Handed over: a file someone waits for, or the last one queued (a
    cold open). Written by the parser: a Ray task (another node), a file too big to hand over,
    and a file of a bulk load with `queued_after` others behind it, or one of the many files a
    run-level view waits for (`jobs.RUN_PRIORITY`; many ranks: the parsers
    write the cache in parallel, where the server's one writer thread would queue them all:
    1,024 small ranks, Distributed view 19.5 -> 0.94 s, bench/cluster_bench.py)."""
    if remote or job.estimate - BASE_MEMORY > HANDOVER_MAX_JSON_BYTES:
        return False
    return job.priority >= WANTED_PRIORITY or queued_after == 0


def admits(job: LoadJob, running: Iterable[LoadJob], workers: int, memory_budget: int) -> bool:
    """Whether `job` may start beside the `running` ones: one file always runs (however big);
    a job after a crash runs alone; otherwise a free process slot and the memory estimates
    within the budget. A split parse counts as one slot here: its helper processes only borrow
    the other cores while nothing else waits, so one file (a slow or hostile one) never holds
    more than its own slot and healthy files of other runs start beside it."""
    running = list(running)
    if not running:
        return True
    if job.solo or any(j.solo for j in running):
        return False
    slots = len(running)
    in_use = sum(j.estimate for j in running)
    return slots < workers and in_use + job.estimate <= memory_budget


def death_message(exitcode: Optional[int]) -> str:
    """Why the parser process of a file died, from its exit code: killed by a signal (the
    out-of-memory killer sends SIGKILL) or exited (it could not start, or crashed)."""
    if exitcode is None or exitcode < 0:
        return ("the parser process was killed while reading this file (out of memory?); "
                f"try a machine with more memory, or lower {LOAD_WORKERS_ENV}")
    return (f"the parser process exited unexpectedly (exit code {exitcode}): it could not "
            "start or crashed; see the TensorBoard log")


def _kill(executor: Executor) -> None:
    """Stop an executor without waiting for running parses (they may take minutes): local
    workers are killed and reaped, so old and new parsers never add up."""
    if isinstance(executor, WorkerPool):
        executor.kill()
    else:
        executor.shutdown(wait=False, cancel_futures=True)
