"""`ViewSpec`: everything about one data route of a view, declared once (see `registry.py`).

From the specs come the server's data routes, the CLI's `report --view` names and flags, the
OpenAPI paths and parameters, and the CSV a payload exports to. A spec's `kind` says what its
builder reads:

- `TABLE`: one worker span's table, `build(table, options)`;
- `SPAN`: every usable worker's table of one span, `build(tables, skipped, options)`; with a
  `summarize` function, the builder gets each worker's small per-file summary instead of its
  table (`summarize(table)`, computed by the parser child and cached next to the table), so a
  run-level view never holds all workers' tables (with `span_tables`, also the tables of a
  few workers chosen from the summaries and options);
- `PAIR`: two worker spans (base and experiment), `build(base, exp, options)`;
- `EXPORT`: a memory-timeline export, `build(table_or_none, export, options)`;
- `SNAPSHOT`: an allocator snapshot of the run, `build(table_or_none, (snapshot, names),
  options)` (the table of the span it is shown with, if any; all snapshot names of the run).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlencode

import msgspec

from ..output.rows import RowsOf
from .options import NoOptions, option_fields

TABLE, SPAN, PAIR, EXPORT, SNAPSHOT = "table", "span", "pair", "export", "snapshot"
#: Where payloads are cached: on disk (one entry per file version and options), only in the
#: server's in-memory body LRU (many small variants, e.g. zoomed ranges), or not at all
#: (timeline windows: each a new key, and cheap once the index is built).
DISK, MEMORY, NONE = "disk", "memory", "none"


def always_disk(_options: Any) -> str:
    return DISK


def never(_options: Any) -> str:
    return NONE


@dataclass(frozen=True)
class ViewSpec:
    name: str  # `report --view` name, e.g. "operator_pies"
    route: str  # data route under /data/plugin/torch_prof, e.g. "/operators/pies"
    view: str  # the view (tab) it belongs to, a name of `tabs.VIEWS`
    build: Callable[..., Any]
    kind: str = TABLE
    options: type[msgspec.Struct] = NoOptions
    rows: Optional[RowsOf] = None  # the CSV rows of a payload (None: JSON only)
    cache: Callable[[Any], str] = always_disk  # DISK, MEMORY or NONE per options
    #: Idempotent work on the table that the server may already be doing in the background
    #: (the timeline index): run before `build`, once per table.
    prepare: Optional[Callable[[Any], Any]] = None
    #: The payload's type (a TypedDict of `tb_plugin.payloads`): OpenAPI `components.schemas`,
    #: hence the frontend's types, and what the contract tests decode replies against.
    payload: Any = None
    summary: str = ""  # OpenAPI summary and CLI help
    description: str = ""  # OpenAPI description
    #: OpenAPI: status -> description of answers that differ from the generic error.
    errors: dict[str, str] = field(default_factory=dict)
    #: SPAN only: the per-file summary the builder reads instead of a table (a pure function of
    #: one table returning JSON-able builtins), and which files the parser child computes it for
    #: (from the file's features; others get it on first request).
    summarize: Optional[Callable[[Any], Any]] = None
    summary_wanted: Callable[[dict[str, Any]], bool] = field(default=lambda _features: True)
    #: SPAN with `summarize` only: the few workers whose tables the builder also reads, from
    #: the summaries and the options (`span_tables(inputs, options)`); the builder is then
    #: `build(inputs, skipped, options, tables)` (the multi-rank timeline: at most 8 tables).
    span_tables: Optional[Callable[[dict[str, Any], Any], list[str]]] = None
    #: The summary's type (a msgspec Struct or TypedDict): what the cache reads back is validated
    #: against it (a tampered or foreign summary is deleted and recomputed).
    summary_type: Any = None

    def summary_key(self) -> str:
        """Cache key of the per-file summary (`summarize`), per code version."""
        return f"torch-prof-server{self.route}/summary#{code_fingerprint()}"

    def payload_key(self, options: Any, **extra: str) -> str:
        """Cache key of a payload: route, options, `extra` and the code's fingerprint."""
        shown = [(f.param, "" if value is None else str(value)) for f in option_fields(
            self.options) for value in [getattr(options, f.attr)]]
        query = urlencode(sorted([*shown, *extra.items()]))
        return f"torch-prof-server{self.route}?{query}#{code_fingerprint()}"


_fingerprint: Optional[str] = None
_fingerprint_lock = threading.Lock()


def code_fingerprint() -> str:
    """A hash of the code that builds payloads: payloads cached on disk by an older version of
    it are never served after an upgrade or a local edit."""
    global _fingerprint
    with _fingerprint_lock:
        if _fingerprint is None:
            _fingerprint = fingerprint_of(Path(__file__).resolve().parent.parent)
        return _fingerprint


def fingerprint_of(package: Path) -> str:
    """The hash of every module under `package`'s analysis/, ingest/, output/ and views/,
    sub-packages included (a view's folder, `analysis/whatif/`), by path and content."""
    digest = hashlib.sha1()
    for folder in ("analysis", "ingest", "output", "views"):
        for path in sorted((package / folder).rglob("*.py")):
            digest.update(path.relative_to(package).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
