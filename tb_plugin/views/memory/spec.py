"""The Memory view's specs, builders and CSV rows."""

from __future__ import annotations

import os
from typing import Any, Optional

from ...analysis.memory.snapshot import (
    UnknownSnapshotDeviceError,
    build_memory_snapshot,
    overlaps_trace,
)
from ...analysis.memory.timeline import build_memory_timeline, build_memory_timeline_for
from ...analysis.memory.view import UnknownDeviceError, build_memory
from ...ingest.memory_export import RawTimeline
from ...ingest.snapshot import Snapshot, SnapshotError
from ...load import load_memory_export, load_snapshot
from ...output.rows import Rows
from ...storage import NotRegularFile, OutsideLogdir
from ..errors import NotInTrace, OptionError, Unreadable
from ..options import NoOptions
from ..spec import DISK, EXPORT, MEMORY, SNAPSHOT, ViewSpec
from .options import MemoryOptions, SnapshotOptions
from .payload import MemoryPayload
from .snapshot_payload import MemorySnapshotPayload
from .timeline_payload import MemoryTimelinePayload


def memory(table: Any, options: MemoryOptions) -> Any:
    start, end = options.start_us, options.end_us
    if start is not None and end is not None and start >= end:
        raise OptionError(f"bad memory range [{start}, {end}]: need start_us < end_us")
    try:
        return build_memory(table, options.device, start, end)
    except UnknownDeviceError as exc:
        device = str(options.device)[:120]
        raise NotInTrace(f"no memory records of device {device!r} in this worker span"
                         ) from exc

def memory_cache(options: MemoryOptions) -> str:
    """The full-range payload on disk; zoomed ranges (one key each) in memory only."""
    return DISK if options.start_us is None and options.end_us is None else MEMORY

def memory_timeline(table: Optional[Any], export: Any, _options: NoOptions) -> Any:
    """The export (a FileRef or path, read through the cache, or already read records); on
    the trace's clock and steps when the span's table is given, else on its own."""
    try:
        raw = export if isinstance(export, RawTimeline) else load_memory_export(export)
    except (OutsideLogdir, NotRegularFile) as exc:
        raise Unreadable(f"{snapshot_name(export)[:200]}: refused: {exc}") from None
    except OSError as exc:  # gone since the scan, unreadable: that export only
        raise Unreadable(f"{snapshot_name(export)[:200]}: cannot be read: {exc}") from None
    if table is None:
        return build_memory_timeline(raw)
    return build_memory_timeline_for(table, raw)

def snapshot_name(ref: Any) -> str:
    if isinstance(ref, Snapshot):
        return "snapshot"
    return getattr(ref, "name", None) or os.path.basename(os.fspath(ref))

def pick_snapshot(table: Optional[Any], candidates: list[Any]) -> tuple[str, Snapshot]:
    """The one candidate, or among several the first readable one whose period overlaps the
    trace (else the first readable one); `Unreadable` with the first reason if none is."""
    refused: Optional[Unreadable] = None
    readable: list[tuple[str, Snapshot]] = []
    for ref in candidates:
        name = snapshot_name(ref)
        try:
            snap = ref if isinstance(ref, Snapshot) else load_snapshot(ref)
        except SnapshotError as exc:
            refused = refused or Unreadable(f"{name[:200]}: {exc}")
            continue
        if len(candidates) == 1 or (table is not None and overlaps_trace(snap, table)):
            return name, snap
        readable.append((name, snap))
    if readable:
        return readable[0]
    assert refused is not None
    raise refused

def memory_snapshot(table: Optional[Any], source: Any, options: SnapshotOptions) -> Any:
    """`source`: (candidates, names of the run's snapshots) or one snapshot alone; a snapshot
    is a FileRef or path (read through the cache) or already read columns. Of several
    candidates, the one of the trace's period is shown (`pick_snapshot`)."""
    candidates, names = source if isinstance(source, tuple) else ([source], None)
    start, end = options.start, options.end
    if start is not None and end is not None and start >= end:
        raise OptionError(f"bad snapshot range [{start}, {end}]: need start < end")
    name, snap = pick_snapshot(table, list(candidates))
    try:
        return build_memory_snapshot(snap, name, table, options.device, start, end,
                                     options.at, snapshots=names)
    except UnknownSnapshotDeviceError as exc:
        raise NotInTrace(f"no device {str(options.device)[:60]!r} in snapshot "
                         f"{name[:200]!r}") from exc

def snapshot_cache(options: SnapshotOptions) -> str:
    """The default view on disk; zoomed ranges and other instants in memory only."""
    plain = options.start is None and options.end is None and options.at is None
    return DISK if plain else MEMORY


def memory_rows(payload: dict[str, Any]) -> Rows:
    """Per-operator statistics, then the allocation/free pairs, with a `table` column."""
    rows = [{"table": "operators", **r} for r in payload["operators"]["rows"]]
    return rows + [{"table": "events", **r} for r in payload["events"]["rows"]]

def memory_timeline_rows(payload: dict[str, Any]) -> Rows:
    series = payload["series"]
    return [{"t_us": t, **{c: series[c][i] for c in payload["categories"]},
             "total": payload["total"][i]} for i, t in enumerate(payload["t_us"])]

def memory_snapshot_rows(payload: dict[str, Any]) -> Rows:
    curve = payload["curve"]
    return [{"t": t, "allocated": a, "reserved": r}
            for t, a, r in zip(curve["t"], curve["allocated"], curve["reserved"])]


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("memory", "/memory", "Memory", memory,
             payload=MemoryPayload, options=MemoryOptions,
             rows=memory_rows, cache=memory_cache,
             summary="Memory view of a worker span (curves, peaks, alloc/free pairs, "
                     "operators, leaks).",
             description="Shape: see `tb_plugin.analysis.memory.view.build_memory`. `device` "
             "restricts curves and tables\nto one device of `devices`; [start_us, end_us] "
             "(trace us) selects a range. With\n`format=csv`, the per-operator statistics "
             "then the allocation/free pairs, with a `table`\ncolumn (`operators` / "
             "`events`).",
             errors={"404": "Unknown run/worker/span, no Memory view there, or no records of "
                            "`device`."}),
    ViewSpec("memory_timeline", "/memory/timeline", "Memory", memory_timeline,
             payload=MemoryTimelinePayload, kind=EXPORT,
             rows=memory_timeline_rows,
             summary="Memory by category over time, from an `export_memory_timeline` raw "
                     "export.",
             description="With worker and span: the export written next to that span's trace"
             "\n(`<worker>.<ts>.raw.json.gz`), else the run's only export not named after a "
             "trace; times\non the trace clock and leak checks per profiler step. Without "
             "them: the run's only\nexport, on its own clock (for a run that holds an export "
             "but no trace; 400 when the run\nhas several). Shape: see "
             "`tb_plugin.analysis.memory.timeline.build_memory_timeline`.\nWith `format=csv`, "
             "one row per time point (`t_us`, one column per category, `total`).",
             errors={"404": "Unknown run/worker/span, or no export for it."}),
    ViewSpec("memory_snapshot", "/memory/snapshot", "Memory", memory_snapshot,
             payload=MemorySnapshotPayload, kind=SNAPSHOT, options=SnapshotOptions,
             rows=memory_snapshot_rows, cache=snapshot_cache,
             summary="An allocator snapshot (`torch.cuda.memory._dump_snapshot` pickle) of the "
                     "run: curves, segments at an instant, top allocations.",
             description="The run's snapshots are `*.pickle` and `*snapshot*.pkl` files; they "
             "are read with an\nunpickler that builds plain data only (dicts, lists, tuples, "
             "strings, numbers, None):\nanything else is refused with 422 and nothing from the "
             "file runs. With worker and span,\ntimes are on that trace's clock when the "
             "snapshot overlaps its period. Shape: see\n"
             "`tb_plugin.analysis.memory.snapshot.build_memory_snapshot`. With `format=csv`, the "
             "curve\n(`t`, `allocated`, `reserved`).",
             errors={"404": "Unknown run/worker/span, no snapshot in the run, or no such "
                            "snapshot or device.",
                     "422": "The snapshot was refused (not plain data, over "
                            "TORCH_PROF_SNAPSHOT_MAX_MB) or is not a snapshot."}),
)
