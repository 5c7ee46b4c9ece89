"""Parsed tables and encoded payloads in server memory, read from the on-disk cache on demand.

Parser children hand the table of a file someone waits for to the server (`adopt`; the files
of a bulk load they write to the cache themselves, see `pool.hands_over`): it goes straight
into a memory-bounded LRU, and a background thread writes it (and the file's summary) to the
`TraceCache`, so the first view never waits for a disk round-trip. A table that left the LRU is
read back from the cache when a view needs it (once for all concurrent callers). View payloads are
computed once per (file identity, key) through `TraceCache.payload`, and encoded response
bodies are kept in a second, smaller LRU (payloads of several files, or of many small variants
such as zoomed ranges, live only there). When a cache entry is missing, the table is parsed
in the server process instead, once.
"""

from __future__ import annotations

import logging
import queue
import tempfile
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Callable, Optional

from ..cache import TraceCache
from ..ingest import TraceTable
from ..ingest.plain import PlainTable, from_plain
from ..load import load_trace
from ..settings import Settings, available_memory
from .filestate import Versioned
from .memo import MemoryLRU, SingleFlight
from .parse_store import store_parsed

log = logging.getLogger(__name__)

DERIVED_FACTOR = 2  # analyses memoise derived data on a table: count it twice
BODY_MEMORY = 64 << 20
UNKNOWN_TABLE_BYTES = 64 << 20


class Tables:
    """The table LRU, the payload memo and the body LRU of one server."""

    def __init__(self, cache: TraceCache, table_budget: int,
                 body_budget: int = BODY_MEMORY) -> None:
        self.cache = cache
        self._tables: MemoryLRU[TraceTable] = MemoryLRU(table_budget)
        self._bodies: MemoryLRU[bytes] = MemoryLRU(body_budget)
        self._flight = SingleFlight()
        self._unwritten: dict[str, TraceTable] = {}  # adopted, not in the cache yet
        self._lock = threading.Lock()
        self._writes: queue.SimpleQueue[tuple[Versioned, TraceTable, dict[str, Any]]] = \
            queue.SimpleQueue()
        self._writer: Optional[threading.Thread] = None
        self._written = threading.Event()  # set while every adopted table is in the cache
        self._written.set()

    def adopt(self, state: Versioned, plain: PlainTable, summary: dict[str, Any]) -> None:
        """A table a parser just made: keep it, and write it and its summary to the cache in
        the background (off the first view's critical path)."""
        table = from_plain(plain)
        with self._lock:
            self._unwritten[state.identity] = table
            self._written.clear()
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                                name="torch-prof-cache-writer")
                self._writer.start()
        self._tables.put(state.identity, table, _table_bytes(table))
        self._writes.put((state, table, summary))

    def wait_written(self, timeout: float) -> bool:
        """Wait until every adopted table is written to the cache; whether that happened."""
        return self._written.wait(timeout)

    def _write_loop(self) -> None:
        while True:
            state, table, summary = self._writes.get()
            started = time.perf_counter()
            try:
                store_parsed(self.cache, state.ref, table, summary)
            except Exception:  # the cache only saves time: never lose the writer
                log.exception("torch-prof: writing %s to the cache failed", state.ref.url)
            finally:
                with self._lock:
                    self._unwritten.pop(state.identity, None)
                    if not self._unwritten:
                        self._written.set()
            log.debug("torch-prof timing: cache_write %.3f s (%s)",
                      time.perf_counter() - started, state.ref.url)
            del state, table, summary

    def table(self, state: Versioned) -> TraceTable:
        """The parsed table: from the LRU, else from the disk cache (once for all callers)."""
        table = self._tables.get(state.identity)
        if table is not None:
            return table
        return self._flight.do(("table", state.identity), lambda: self._read_table(state))

    def peek(self, state: Versioned) -> Optional[TraceTable]:
        """The table if it is in memory (without making it the most recently used)."""
        return self._tables.peek(state.identity)

    def forget(self, state: Versioned) -> None:
        """The file changed or vanished: its table is stale."""
        self._tables.discard(state.identity)

    def payload(self, state: Versioned, key: str, compute: Callable[[TraceTable], Any],
                schema: Any = None) -> Any:
        """A view payload, computed once per file version and key (and kept on disk; what is
        read back from disk is validated against `schema`)."""
        return self._flight.do(
            ("payload", state.identity, key),
            lambda: self.cache.payload(state.ref, key, lambda: _timed(key, compute,
                                                                      self.table(state)),
                                       schema))

    def run_payload(self, state: Versioned, key: str, compute: Callable[[], Any],
                    schema: Any = None) -> Any:
        """A run-level payload kept on disk beside `state`'s entry (no table is read)."""
        return self._flight.do(("payload", state.identity, key),
                               lambda: self.cache.payload(state.ref, key, compute, schema))

    def memo_body(self, memo_key: tuple[Hashable, ...], make: Callable[[], bytes]) -> bytes:
        """An encoded body under any key (e.g. the identities of several files), kept in
        memory (bounded) after the first request."""
        body = self._bodies.get(memo_key)
        if body is None:
            body = self._flight.do(("body", *memo_key), make)
            self._bodies.put(memo_key, body, len(body))
        return body

    def _read_table(self, state: Versioned) -> TraceTable:
        with self._lock:
            table = self._unwritten.get(state.identity)
        started = time.perf_counter()
        table = table if table is not None else self.cache.load_table(state.ref)
        if table is None:  # the cache entry vanished or could not be written: parse here, once
            log.warning("torch-prof: %s is not in the cache; parsing it in the server process",
                        state.ref.url)
            table = load_trace(state.ref, cache=self.cache)
        self._tables.put(state.identity, table, _table_bytes(table))
        log.debug("torch-prof timing: table_read %.3f s (%s)", time.perf_counter() - started,
                  state.ref.url)
        return table


def _timed(key: str, compute: Callable[[TraceTable], Any], table: TraceTable) -> Any:
    started = time.perf_counter()
    value = compute(table)
    log.debug("torch-prof timing: analysis %.3f s (%s)", time.perf_counter() - started, key)
    return value


def table_budget(config: Settings) -> int:
    """Bytes of parsed tables kept in memory: configured, else a quarter of what is free."""
    if config.table_memory:
        return config.table_memory
    available = available_memory() or (8 << 30)
    return max(256 << 20, min(available // 4, 4 << 30))


def usable_cache(cache: TraceCache) -> tuple[TraceCache, Optional[Path]]:
    """The cache to use, and the private temp dir to remove at exit when one was needed.

    Tables that leave the server's memory are read back from the cache, so the server always
    needs one: when
    the user disabled it, or its folder is not writable, a private temp dir is used instead.
    """
    if cache.enabled and cache.writable():
        return cache, None
    if cache.enabled:  # the cache reported why (once); this says what happens instead
        log.info("torch-prof: the cache %s is not writable; using a temporary one", cache.root)
    private = Path(tempfile.mkdtemp(prefix="torch-prof-cache-"))
    return TraceCache(private, cache.config), private


def _table_bytes(table: TraceTable) -> int:
    try:
        size = sum(int(frame.memory_usage(index=True, deep=True).sum())
                   for frame in table.tables().values())
    except Exception:  # an estimate only
        size = UNKNOWN_TABLE_BYTES
    return size * DERIVED_FACTOR

