"""`RunStore`: the server's `TraceProvider`, a catalogue, its tables and a warmer over one logdir.

Each part has one job: `catalog.Catalog` scans the logdir and keeps every file's load state
(parsing through `pool.LoadPool`), `tables.Tables` holds parsed tables and encoded payloads in
bounded memory, `warmer.Warmer` computes derived data of viewed tables in the background. This
class wires them together and forwards the provider's methods; the knobs come from
`tb_plugin.settings`, and the scanner, parser pool and clock can be injected (tests do).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Optional

from ..cache import TraceCache, open_cache
from ..discovery import RunScanner
from ..ingest import TraceTable
from ..settings import Settings, settings
from ..storage import FileRef
from .catalog import Catalog, Clock, Parser, PoolFactory, Scanner
from .filestate import FileState
from .pool import LoadOutcome, LoadPool
from .provider import TraceFile
from .tables import Tables, table_budget, usable_cache
from .warmer import Warmer, WarmFunction

__all__ = ["RunStore"]


class RunStore:
    """Implements `provider.TraceProvider`."""

    def __init__(self, logdir: Optional[str], cache: Optional[TraceCache] = None, *,
                 config: Optional[Settings] = None, scanner: Optional[Scanner] = None,
                 pool_factory: Optional[PoolFactory] = None, clock: Clock = time.time) -> None:
        self.config = config or settings()
        self.logdir = logdir or ""
        cache, self._private_cache = usable_cache(cache or open_cache(self.config))
        self._tables = Tables(cache, table_budget(self.config))
        self._catalog = Catalog(self.logdir, cache, scanner=scanner or RunScanner(
                                serve_outside_logdir=self.config.serve_outside_logdir),
                                pool_factory=pool_factory or self._load_pool,
                                forget=self._tables.forget, adopt=self._tables.adopt,
                                clock=clock, config=self.config)
        self._warmer = Warmer(self._tables, self._catalog.is_current)
        self._lock = threading.Lock()
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start scanning, loading and warming in the background (idempotent, cheap)."""
        with self._lock:
            if not self._started:
                self._started = True
                self._catalog.start()
                self._warmer.start()

    def close(self) -> None:
        self._catalog.close()
        self._warmer.close()
        if self._private_cache is not None:
            shutil.rmtree(self._private_cache, ignore_errors=True)

    def add_warmer(self, warm: WarmFunction) -> None:
        """Run `warm(table)` in the background on the tables of viewed files (unless the
        settings turn warming off); see `warmer.Warmer`."""
        if self.config.warm:
            self._warmer.add(warm)

    def wait_first_scan(self, timeout: float) -> bool:
        return self._catalog.wait_first_scan(timeout)

    def wait_warmed(self, timeout: float) -> bool:
        """Wait until no viewed file is queued or being warmed; whether that happened."""
        return self._warmer.wait_idle(timeout)

    def wait_written(self, timeout: float) -> bool:
        """Wait until the tables parsers handed over are in the cache; whether that happened."""
        return self._tables.wait_written(timeout)

    def _load_pool(self, root: Path, on_start: Callable[[str], None],
                   on_progress: Callable[[str, float], None],
                   on_done: Callable[[LoadOutcome], None]) -> Parser:
        return LoadPool(root, on_start, on_progress, on_done, config=self.config)

    # -- the catalogue -------------------------------------------------------------------------

    def active(self) -> bool:
        self.start()
        return self._catalog.active()

    def listing(self) -> dict[str, Any]:
        self.start()
        return self._catalog.listing()

    def views(self, run: str) -> list[str]:
        return self._catalog.views(run)

    def workers(self, run: str, view: str) -> list[str]:
        return self._catalog.workers(run, view)

    def spans(self, run: str, worker: str) -> list[str]:
        return self._catalog.spans(run, worker)

    def status(self, run: str, worker: str, span: str) -> dict[str, Any]:
        return self._catalog.status(run, worker, span)

    def memory_exports(self, run: str) -> list[FileRef]:
        return self._catalog.memory_exports(run)

    def memory_snapshots(self, run: str) -> list[FileRef]:
        return self._catalog.memory_snapshots(run)

    def file(self, run: str, worker: str, span: str) -> TraceFile:
        return _handed(self._catalog.file(run, worker, span), run, worker, span)

    def source(self, run: str, worker: str, span: str) -> FileRef:
        return self._catalog.file(run, worker, span).ref

    def usable_file(self, run: str, worker: str, span: str) -> TraceFile:
        return _handed(self._catalog.usable_file(run, worker, span), run, worker, span)

    def want(self, *spans: tuple[str, str, str]) -> None:
        self._catalog.want(*(self._catalog.file(*names) for names in spans))

    def span_files(self, run: str, span: str) -> tuple[dict[str, TraceFile], dict[str, str]]:
        usable, skipped = self._catalog.span_files(run, span)
        return {worker: _handed(state, run, worker, span)
                for worker, state in usable.items()}, skipped

    # -- tables and derived data ---------------------------------------------------------------

    def table(self, file: TraceFile) -> TraceTable:
        return self._tables.table(file)

    def payload(self, file: TraceFile, key: str, compute: Callable[[TraceTable], Any],
                schema: Any = None) -> Any:
        return self._tables.payload(file, key, compute, schema)

    def run_payload(self, file: TraceFile, key: str, compute: Callable[[], Any],
                    schema: Any = None) -> Any:
        return self._tables.run_payload(file, key, compute, schema)

    def memo_body(self, memo_key: tuple[Hashable, ...], make: Callable[[], bytes]) -> bytes:
        return self._tables.memo_body(memo_key, make)

    def warm(self, file: TraceFile) -> bool:
        return self._warmer.warm(file)

    def prepare(self, file: TraceFile, table: TraceTable, warm: WarmFunction) -> None:
        self._warmer.prepare(file, table, warm)


def _handed(state: FileState, run: str, worker: str, span: str) -> TraceFile:
    """What the routes get of a file: its version and what the scan and the parser know of it,
    as plain values (the catalogue keeps changing `state`)."""
    return TraceFile(run, worker, span, state.identity, state.ref,
                     MappingProxyType(state.predicate_features()), state.memory_timeline)
