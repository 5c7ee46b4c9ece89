"""`TraceProvider`: everything the plugin's routes may ask of the data behind them.

The same pattern as TensorBoard's `DataProvider`: the routes depend on this protocol, not on
the concrete `RunStore` (catalogue + tables + warmer), and every method raises the API's errors
(`errors.py`: 404 unknown, 202 still loading, 422 broken) rather than returning sentinels.
Run, worker and span names come from requests; they are only looked up among discovered names.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from ..ingest import TraceTable
from ..storage import FileRef
from .warmer import WarmFunction


@dataclass(frozen=True)
class TraceFile:
    """One worker span's trace file as the provider hands it to the routes: the plain values of
    one file version, taken when the route asked, never the catalogue's live load state.

    `identity` (URL, size, mtime) names the version: payloads and encoded bodies are kept under
    it. The provider reads the table of exactly this version (through `ref`), also when the
    file changes on disk while the request runs."""

    run: str
    worker: str
    span: str
    identity: str
    ref: FileRef = field(repr=False)
    #: What the parser and the scan know of the file (`views.tabs.views_of_file` reads it).
    features: Mapping[str, Any] = field(compare=False, repr=False)
    #: The memory-timeline export the last scan paired with this trace, if any.
    memory_timeline: Optional[FileRef] = None

    @property
    def name(self) -> str:
        """The trace's file name (an allocator snapshot is paired with its trace by it)."""
        return self.ref.name


class TraceProvider(Protocol):
    # -- the catalogue: runs, workers, spans and their load states ------------------------------

    def active(self) -> bool:
        """Whether the plugin's tab is shown: some run is known, or the first scan runs."""
        ...

    def listing(self) -> dict[str, Any]:
        """The `/runs` payload: every run with its state, progress, views and spans."""
        ...

    def views(self, run: str) -> list[str]:
        ...

    def workers(self, run: str, view: str) -> list[str]:
        ...

    def spans(self, run: str, worker: str) -> list[str]:
        ...

    def status(self, run: str, worker: str, span: str) -> dict[str, Any]:
        ...

    def memory_exports(self, run: str) -> list[FileRef]:
        ...

    def memory_snapshots(self, run: str) -> list[FileRef]:
        """The run's allocator snapshots, sorted by name."""
        ...

    # -- the files behind a request -------------------------------------------------------------

    def file(self, run: str, worker: str, span: str) -> TraceFile:
        """The file, whatever its load state."""
        ...

    def source(self, run: str, worker: str, span: str) -> FileRef:
        """The trace file of a span as last scanned, whatever its load state (what
        `/trace/download` serves, as stored)."""
        ...

    def usable_file(self, run: str, worker: str, span: str) -> TraceFile:
        """The file once parsed (202, and parsed first, while pending; 422 if broken)."""
        ...

    def want(self, *spans: tuple[str, str, str]) -> None:
        """Parse the files of these (run, worker, span) first (the sides of one request)."""
        ...

    def span_files(self, run: str, span: str) -> tuple[dict[str, TraceFile], dict[str, str]]:
        """Every worker's usable file of `span`, and the workers left out with why."""
        ...

    # -- tables, payloads and derived data ------------------------------------------------------

    def table(self, file: TraceFile) -> TraceTable:
        ...

    def payload(self, file: TraceFile, key: str, compute: Callable[[TraceTable], Any],
                schema: Any = None) -> Any:
        """A view payload, computed once per file version and key; a stored one is validated
        against `schema` (the spec's payload type) and recomputed when it does not match."""
        ...

    def run_payload(self, file: TraceFile, key: str, compute: Callable[[], Any],
                    schema: Any = None) -> Any:
        """A payload of several files (a run-level view), kept on disk beside `file`'s entry
        under `key` (which names every file version), computed once; no table is read."""
        ...

    def memo_body(self, memo_key: tuple[Hashable, ...], make: Callable[[], bytes]) -> bytes:
        """An encoded response body, kept in memory after the first request."""
        ...

    def warm(self, file: TraceFile) -> bool:
        """The user looks at this file: warm its derived data in the background."""
        ...

    def prepare(self, file: TraceFile, table: TraceTable, warm: WarmFunction) -> None:
        """Run `warm(table)` now, or wait for the background run of it under way."""
        ...
