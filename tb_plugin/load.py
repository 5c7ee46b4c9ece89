"""Cache or parse: a trace file's `TraceTable`, a memory export's records and an allocator
snapshot's columns, from the on-disk
cache when it holds a valid entry, else parsed (and stored).

This step sits above both ingest (which parses and never knows the cache) and the cache (which
stores ingest's results and never parses).
"""

from __future__ import annotations

import os
import threading
from typing import Optional, Union

from .cache import TraceCache, default_cache
from .ingest.loader import parse_trace
from .ingest.memory_export import RawTimeline, read_raw_timeline
from .ingest.parse import ProgressCallback
from .ingest.schema import LoadState, TraceTable
from .ingest.snapshot import Snapshot, SnapshotError, read_snapshot
from .isolated import IsolatedFailure, IsolatedTimeout, call_isolated
from .settings import PARSE_DEADLINE_ENV, SNAPSHOT_MEMORY_ENV, Settings, settings
from .storage import FileRef, NotRegularFile, OutsideLogdir, check_servable, open_ref

#: Snapshot reader processes at a time (`read_snapshot_isolated`).
SNAPSHOT_READERS = 2
_READERS = threading.BoundedSemaphore(SNAPSHOT_READERS)


def load_trace(
    source: Union[str, FileRef],
    *,
    use_cache: bool = True,
    cache: Optional[TraceCache] = None,
    progress: Optional[ProgressCallback] = None,
    processes: Optional[int] = None,
) -> TraceTable:
    """Parse one trace file (path or URL), from the on-disk cache when it is valid.

    `processes`: 1 parses in this process only; N lets a big local file be parsed in N parts
    by N processes; None follows $TORCH_PROF_PARSE_PROCESSES, else the usable cores (see
    ingest/parallel.py).
    A table whose parse failed (state ERROR) is not stored.
    """
    ref = _ref(source)
    config = cache.config if cache is not None else None  # else read where the parse starts
    if not use_cache:
        return parse_trace(ref, progress=progress, processes=processes, config=config)
    store = cache or default_cache()
    cached = store.load_table(ref)
    if cached is not None:
        return cached
    table = parse_trace(ref, progress=progress, processes=processes, config=config)
    if table.status.state != LoadState.ERROR:
        store.save_table(ref, table)
    return table


def load_memory_export(source: Union[str, os.PathLike, FileRef], *, use_cache: bool = True,
                       cache: Optional[TraceCache] = None) -> RawTimeline:
    """The records of a memory-timeline export (path or URL), read once per file identity;
    a file found under a logdir is checked as it is now (`check_servable`: `OutsideLogdir`,
    `NotRegularFile`) before it is answered from the cache."""
    ref = _ref(source)
    check_servable(ref)
    if not use_cache:
        return read_raw_timeline(ref)
    store = cache or default_cache()
    cached = store.load_export(ref)
    if cached is not None:
        return cached
    raw = read_raw_timeline(ref)
    store.save_export(ref, raw)
    return raw


def load_snapshot(source: Union[str, os.PathLike, FileRef], *, use_cache: bool = True,
                  cache: Optional[TraceCache] = None) -> Snapshot:
    """The columns of an allocator snapshot (path or URL), read once per file identity with
    the plain-data pickle reader, in a process of its own whose memory is capped
    (`read_snapshot_isolated`); `SnapshotError` (never cached) when it is refused."""
    ref = _ref(source)
    try:
        check_servable(ref)  # as it is now, before the cache answers for it
    except (OutsideLogdir, NotRegularFile) as exc:
        raise SnapshotError(f"refused: {exc}") from None
    except OSError as exc:
        raise SnapshotError(f"cannot be read: {exc}") from None
    config = cache.config if cache is not None else None
    if not use_cache:
        return read_snapshot_isolated(ref, config)
    store = cache or default_cache()
    cached = store.load_snapshot(ref)
    if cached is not None:
        return cached
    snap = read_snapshot_isolated(ref, config)
    store.save_snapshot(ref, snap)
    return snap


def read_snapshot_isolated(ref: FileRef, config: Optional[Settings] = None) -> Snapshot:
    """`read_snapshot` in a fresh process of at most $TORCH_PROF_SNAPSHOT_MEMORY_MB of address
    space: what a hostile pickle makes the reader allocate is never this process's memory, and
    a snapshot that needs more, or that takes longer than $TORCH_PROF_PARSE_DEADLINE_S to read,
    is refused (`SnapshotError`). At most `SNAPSHOT_READERS` such processes at a time (the
    others wait), so many requests cannot multiply the limit. `config`: the settings (default:
    the process's, read here)."""
    config = config if config is not None else settings()
    try:
        with _READERS:
            return call_isolated(read_snapshot, ref, config.snapshot_max_bytes,
                                 memory_bytes=config.snapshot_memory,
                                 timeout_s=config.parse_deadline_s)
    except IsolatedTimeout as exc:
        raise SnapshotError(f"refused: {exc} ({PARSE_DEADLINE_ENV})") from None
    except IsolatedFailure as exc:
        raise SnapshotError(f"refused: {exc} ({SNAPSHOT_MEMORY_ENV})") from None


def _ref(source: Union[str, os.PathLike, FileRef]) -> FileRef:
    return source if isinstance(source, FileRef) else open_ref(os.fspath(source))
