"""Derived data of viewed tables (the timeline index), computed in a background thread.

When a worker span is viewed, its table is read and the registered warm functions run on it
in the background, so that e.g. its first Trace request needs no index build. A request that
needs a warm function's result meanwhile joins the run under way (`prepare`) instead of
starting a second one. Warm functions must be idempotent and cheap once done (memoised on the
table); each runs at most once per table here.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

from ..ingest import TraceTable
from .filestate import Versioned
from .memo import SingleFlight
from .tables import Tables

log = logging.getLogger(__name__)

WarmFunction = Callable[[TraceTable], Any]

WARM_QUEUE = 8
RAN_KEY = "torch-prof-server/warmed"  # in `table.derived`: the warm functions run on it
POLL_S = 1.0  # how often an idle warm thread checks whether the server closed


class Warmer:
    """The warm queue and its thread. `is_current(state)` says whether a queued file is still
    the current version of its file (a changed or vanished file is not warmed)."""

    def __init__(self, tables: Tables, is_current: Callable[[Versioned], bool]) -> None:
        self._tables = tables
        self._is_current = is_current
        self._functions: list[WarmFunction] = []
        self._queue: queue.Queue[Versioned] = queue.Queue(WARM_QUEUE)
        self._pending: set[str] = set()  # identities queued or being warmed
        self._idle = threading.Condition()
        self._flight = SingleFlight()
        self._started = self._closed = False

    def add(self, warm: WarmFunction) -> None:
        """Run `warm(table)` in the background on the tables of viewed files (see `warm`)."""
        self._functions.append(warm)

    def start(self) -> None:
        """Start the warm thread (idempotent; `warm` starts it too)."""
        with self._idle:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._loop, name="torch-prof-warm", daemon=True).start()

    def close(self) -> None:
        self._closed = True

    def prepare(self, state: Versioned, table: TraceTable, warm: WarmFunction) -> None:
        """Run `warm(table)` now, or wait for the run of it already under way; at once if it
        ran on this table before."""
        ran: set[WarmFunction] = table.derived.setdefault(RAN_KEY, set())
        if warm in ran:
            return

        def run() -> None:
            if warm not in ran:  # a run that ended between the check above and this flight
                warm(table)
                ran.add(warm)

        self._flight.do(("warm", state.identity, id(table), warm), run)

    def warm(self, state: Versioned) -> bool:
        """Someone looks at this file: read its table and run the warm functions on it in the
        background (once per table). Whether it was queued now. Views of several files
        (Distributed, Diff) do not call this."""
        table = self._tables.peek(state)
        if not self._functions or (table is not None and self._warmed(table)):
            return False
        self.start()
        with self._idle:
            if state.identity in self._pending:
                return False
            self._pending.add(state.identity)
        try:
            self._queue.put_nowait(state)
        except queue.Full:  # only a head start: requests compute it themselves
            self._done(state)
            return False
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no file is queued or being warmed; whether that happened in time."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def _warmed(self, table: TraceTable) -> bool:
        return set(self._functions) <= table.derived.get(RAN_KEY, set())

    def _loop(self) -> None:
        while not self._closed:
            try:
                state = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            try:
                self._warm_now(state)
            except Exception:  # a missing cache entry, a bug in a warm function: not fatal
                log.exception("torch-prof: warming %s failed", state.ref.url)
            finally:
                self._done(state)

    def _warm_now(self, state: Versioned) -> None:
        if self._closed or not self._is_current(state):  # changed or vanished meanwhile
            return
        table = self._tables.table(state)
        for warm in list(self._functions):
            self.prepare(state, table, warm)

    def _done(self, state: Versioned) -> None:
        with self._idle:
            self._pending.discard(state.identity)
            self._idle.notify_all()
