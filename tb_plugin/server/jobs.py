"""The parser pool's jobs and its queue: which file is parsed next, and which small files are
parsed together in one call to a parser process (a batch: one round trip and one result for
many tiny files, `JobQueue.small_batch`)."""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ..ingest.plain import PlainTable
from ..ingest.sizing import PARSER_MEMORY
from ..storage import FileRef

#: Peak memory of a parser process beyond the file itself (one copy: ingest/sizing.py).
BASE_MEMORY = PARSER_MEMORY
#: Files with at most this much JSON (estimated as `estimate_memory` does) are parsed in
#: batches during a bulk load: one call to a parser process for up to `BATCH_FILES` of them,
#: up to `BATCH_JSON_BYTES` in all (one round trip and one result per batch, not per file).
BATCH_FILE_JSON_BYTES = 1 << 20
BATCH_FILES = 64
BATCH_JSON_BYTES = 8 << 20
#: The parser of a batch writes the table of a file with less JSON than this to the cache only
#: when a view asks for it (then the server does): parsing a file this small costs no more than
#: reading its table back (25 KB of JSON: parse 3.4 ms, cache read 6.3 ms; 340 KB: 9.3 vs
#: 6.2 ms), and writing it cost 6 of the 15 ms per file of a bulk load (bench/many_runs.py).
TABLE_MIN_JSON_BYTES = 128 << 10


@dataclass
class LoadJob:
    key: str  # the file's identity: results for a file that changed since are ignored
    ref: FileRef
    estimate: int
    priority: int = 0
    attempts: int = 0
    solo: bool = False  # after a crash: run alone, so a second crash names the culprit
    start_failures: int = 0  # times no parser process could be started for it
    processes: int = 1  # > 1 when the parser may split the file across processes
    #: Whether the parser also stores the run-level view summaries (the catalogue turns it off
    #: for the files of small runs: those views compute them on first request).
    view_summaries: bool = True
    alone: bool = False  # never batched (after its batch's parser died)
    batch: list[LoadJob] = field(default_factory=list, compare=False)  # the files of a batch
    submitted_at: float = field(default=0.0, compare=False)  # wall clock, for the timing log
    token: int = field(default=0, compare=False)


@dataclass
class LoadOutcome:
    key: str
    summary: Optional[dict[str, Any]] = None
    error: Optional[str] = None
    table: Optional[PlainTable] = None  # the parsed table, when a parser just made it


#: A request waits for this one file: the parser hands its table over (`pool.hands_over`).
WANTED_PRIORITY = 10
#: A run-level view waits for many files (all ranks of a span): they go first in the queue, but
#: the parsers still write them to the cache in parallel (batches included), as a bulk load:
#: handing 1,024 ranks over to the server's one writer made a polled Distributed view answer
#: 270 s after the last file was parsed, instead of 14 s (issue 28).
RUN_PRIORITY = 1


def batchable(job: LoadJob) -> bool:
    """Whether a queued file may be parsed in a batch: small (`BATCH_FILE_JSON_BYTES`), not
    waited for alone (that one is handed over at once), not after a crash."""
    return (job.priority < WANTED_PRIORITY and not job.solo and not job.alone and job.attempts == 0
            and job.estimate - BASE_MEMORY <= BATCH_FILE_JSON_BYTES)


class JobQueue:
    """Queued files by priority: requested files first, then smaller files (the first views
    are ready sooner, and a big file does not hold up a run of small ones), then arrival.
    Not thread-safe: the pool holds its lock around every call."""

    def __init__(self) -> None:
        self._pending: dict[str, LoadJob] = {}
        self._heap: list[tuple[int, int, int, str]] = []  # (-priority, size, token, key)
        self._tokens = itertools.count(1)

    def __len__(self) -> int:
        return len(self._pending)

    def push(self, job: LoadJob) -> None:
        job.token = next(self._tokens)
        self._pending[job.key] = job
        heapq.heappush(self._heap, _entry(job))

    def bump(self, key: str, priority: int) -> bool:
        """Raise a queued job's priority; False when it is not queued or already that high."""
        job = self._pending.get(key)
        if job is None or job.priority >= priority:
            return False
        job.priority, job.token = priority, next(self._tokens)
        heapq.heappush(self._heap, _entry(job))  # the old entry goes stale (token mismatch)
        return True

    def remove(self, key: str) -> None:
        self._pending.pop(key, None)

    def clear(self) -> None:
        self._pending.clear()
        self._heap.clear()

    def peek(self) -> Optional[LoadJob]:
        """The next job (stale heap entries are dropped on the way)."""
        while self._heap:
            *_, token, key = self._heap[0]
            job = self._pending.get(key)
            if job is not None and job.token == token:
                return job
            heapq.heappop(self._heap)
        return None

    def pop(self) -> Optional[LoadJob]:
        job = self.peek()
        if job is not None:
            heapq.heappop(self._heap)
            del self._pending[job.key]
        return job

    def small_batch(self) -> list[LoadJob]:
        """The next files to parse in one call (`batchable`), in queue order: up to
        `BATCH_FILES` of them and `BATCH_JSON_BYTES` of JSON, and never the last one queued
        (the file of a cold open is handed over, `hands_over`). Empty when the next file is
        not batchable. Nothing is removed (`take_batch` does)."""
        batch: list[LoadJob] = []
        looked: list[tuple[int, int, int, str]] = []  # popped to look, pushed back after
        total = 0
        while self._heap and len(batch) < BATCH_FILES:
            entry = heapq.heappop(self._heap)
            job = self._pending.get(entry[3])
            if job is None or job.token != entry[2]:
                continue  # a stale entry (removed, or bumped since): dropped for good
            looked.append(entry)
            json_bytes = job.estimate - BASE_MEMORY
            if not batchable(job) or total + json_bytes > BATCH_JSON_BYTES:
                break
            batch.append(job)
            total += json_bytes
        for entry in looked:
            heapq.heappush(self._heap, entry)
        return batch if len(batch) < len(self._pending) else batch[:-1]

    def take_batch(self, batch: list[LoadJob]) -> LoadJob:
        """Remove the files of `small_batch` from the queue; the job that stands for them
        while they run (its memory estimate is its biggest file's: they run one by one)."""
        for job in batch:
            self._pending.pop(job.key, None)
        lead = LoadJob(batch[0].key, batch[0].ref, max(j.estimate for j in batch),
                       batch=batch, submitted_at=time.time())
        lead.token = next(self._tokens)
        return lead


def _entry(job: LoadJob) -> tuple[int, int, int, str]:
    return (-job.priority, job.ref.size, job.token, job.key)
