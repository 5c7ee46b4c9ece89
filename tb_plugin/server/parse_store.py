"""A parsed table, its summary and its run-level view summaries into the `TraceCache`.

Used by the server's cache writer (for a table a parser handed over) and by the parser
processes that write the cache themselves: a task on a Ray cluster (its table cannot be handed
over from a remote node; the shared cache carries it), a local file too big to hand over, and
the files of a bulk load (many ranks: written in parallel by the parsers).
Kept apart from `parse_child` because it needs the view registry: a parser process imports it
only when it is given `parse_into_cache`, so the common case starts without it.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Optional

from ..analysis.features import summarize
from ..cache import TraceCache, cache_location
from ..ingest import parse_trace
from ..ingest.schema import LoadState
from ..settings import Settings
from ..storage import FileRef
from ..views.registry import SPECS
from .parse_child import parse_table, store_summary

log = logging.getLogger(__name__)


def parse_into_cache(key: str, ref: FileRef, cache_root: str, processes: int = 1,
                     view_summaries: bool = True, config: Optional[Settings] = None
                     ) -> dict[str, Any]:
    """Parse one file and write its table, summary and (with `view_summaries`) view summaries
    to the cache at `cache_root` (a path or an fsspec URL); return only the summary. An entry
    already committed there (a retried Ray task) is read instead of parsed. `config`: the
    server's settings (default: this process's)."""
    return _parse_into(TraceCache(cache_location(cache_root), config), key, ref, processes,
                       view_summaries)


def parse_batch_into_cache(files: list[tuple[str, FileRef, bool, bool]], cache_root: str,
                           config: Optional[Settings] = None
                           ) -> list[tuple[str, Optional[dict[str, Any]], Optional[str]]]:
    """`parse_into_cache` for each (key, ref, view_summaries, with_table) of a batch of small
    files, one after the other in this process, without progress reports: (key, summary, None)
    for each file, or (key, None, error) for a file whose parse raised (a bug: its batch-mates
    are parsed all the same). Without `with_table` only the summaries are stored: the table
    of a tiny file is parsed again when a view needs it (`jobs.TABLE_MIN_JSON_BYTES`)."""
    cache = TraceCache(cache_location(cache_root), config)
    results: list[tuple[str, Optional[dict[str, Any]], Optional[str]]] = []
    for key, ref, view_summaries, with_table in files:
        try:
            results.append((key, _parse_into(cache, key, ref, 0, view_summaries, with_table),
                            None))
        except Exception as exc:  # noqa: BLE001 - reported as this file's error
            log.exception("torch-prof: loading %s failed", ref.url)
            results.append((key, None, f"internal error while loading "
                            f"({type(exc).__name__}: {exc}); please report it"))
    return results


def _parse_into(cache: TraceCache, key: str, ref: FileRef, processes: int,
                view_summaries: bool, with_table: bool = True) -> dict[str, Any]:
    """`processes` 0: parse in this process without progress reports (a file of a batch)."""
    cached = cache.load_table(ref) if with_table else None
    if cached is not None:
        table = cached
    elif processes:
        table = parse_table(key, ref, processes, cache.config)
    else:
        table = parse_trace(ref, processes=1, config=cache.config)
    summary = summarize(table)
    if table.status.state != LoadState.ERROR:  # not cached: a retry re-reads the file
        store_parsed(cache, ref, table, summary, with_table=with_table and cached is None,
                     view_summaries=view_summaries)
    return summary


def store_parsed(cache: TraceCache, ref: FileRef, table: Any, summary: dict[str, Any], *,
                 with_table: bool = True, view_summaries: bool = True) -> None:
    """A parsed table (unless it is there already), its summary and (with `view_summaries`)
    its run-level view summaries, into the cache (each payload only when missing)."""
    if with_table:
        cache.save_table(ref, table)
    store_summary(cache, ref, summary)
    if view_summaries:
        store_view_summaries(cache, ref, table, summary["features"])


def store_view_summaries(cache: TraceCache, ref: FileRef, table: Any,
                         features: dict[str, Any]) -> None:
    """The per-file summaries of run-level views (the Distributed view's rank summary), next to
    the table, while the table is in memory: the server then never reads the table for them.
    A failure here costs only the precomputation (the server computes it on first request)."""
    for spec in SPECS.values():
        if spec.summarize is None or not spec.summary_wanted(features):
            continue
        try:
            cache.payload(ref, spec.summary_key(), functools.partial(spec.summarize, table),
                          spec.summary_type)
        except Exception:  # noqa: BLE001 - the request path reports it with the file's name
            log.warning("torch-prof: %s summary of %s failed", spec.name, ref.url,
                        exc_info=True)
