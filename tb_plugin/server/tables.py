"""Parsed tables and encoded payloads in server memory, read from the on-disk cache on demand.

Parser children leave every table in the `TraceCache`; a table is read back into a
memory-bounded LRU when a view needs it (once for all concurrent callers). View payloads are
computed once per (file identity, key) through `TraceCache.payload`, and encoded response
bodies are kept in a second, smaller LRU (payloads of several files, or of many small variants
such as zoomed ranges, live only there). When a cache entry is missing, the table is parsed
in the server process instead, once.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Callable, Optional

from ..cache import TraceCache
from ..ingest import TraceTable
from ..load import load_trace
from ..settings import Settings, available_memory
from .filestate import FileState
from .memo import MemoryLRU, SingleFlight

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

    def table(self, state: FileState) -> TraceTable:
        """The parsed table: from the LRU, else from the disk cache (once for all callers)."""
        table = self._tables.get(state.identity)
        if table is not None:
            return table
        return self._flight.do(("table", state.identity), lambda: self._read_table(state))

    def peek(self, state: FileState) -> Optional[TraceTable]:
        """The table if it is in memory (without making it the most recently used)."""
        return self._tables.peek(state.identity)

    def forget(self, state: FileState) -> None:
        """The file changed or vanished: its table is stale."""
        self._tables.discard(state.identity)

    def payload(self, state: FileState, key: str, compute: Callable[[TraceTable], Any],
                schema: Any = None) -> Any:
        """A view payload, computed once per file version and key (and kept on disk; what is
        read back from disk is validated against `schema`)."""
        return self._flight.do(
            ("payload", state.identity, key),
            lambda: self.cache.payload(state.ref, key, lambda: compute(self.table(state)),
                                       schema))

    def memo_body(self, memo_key: tuple[Hashable, ...], make: Callable[[], bytes]) -> bytes:
        """An encoded body under any key (e.g. the identities of several files), kept in
        memory (bounded) after the first request."""
        body = self._bodies.get(memo_key)
        if body is None:
            body = self._flight.do(("body", *memo_key), make)
            self._bodies.put(memo_key, body, len(body))
        return body

    def _read_table(self, state: FileState) -> TraceTable:
        table = self.cache.load_table(state.ref)
        if table is None:  # the cache entry vanished or could not be written: parse here, once
            log.warning("torch-prof: %s is not in the cache; parsing it in the server process",
                        state.ref.url)
            table = load_trace(state.ref, cache=self.cache)
        self._tables.put(state.identity, table, _table_bytes(table))
        return table


def table_budget(config: Settings) -> int:
    """Bytes of parsed tables kept in memory: configured, else a quarter of what is free."""
    if config.table_memory:
        return config.table_memory
    available = available_memory() or (8 << 30)
    return max(256 << 20, min(available // 4, 4 << 30))


def usable_cache(cache: TraceCache) -> tuple[TraceCache, Optional[Path]]:
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


def _table_bytes(table: TraceTable) -> int:
    try:
        size = sum(int(frame.memory_usage(index=True, deep=True).sum())
                   for frame in table.tables().values())
    except Exception:  # an estimate only
        size = UNKNOWN_TABLE_BYTES
    return size * DERIVED_FACTOR


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            return True
    except OSError:
        return False
