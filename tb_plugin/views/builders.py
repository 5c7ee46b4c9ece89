"""The views' builders: each data route's adapter from its tables and options (an
`option_types` Struct) to the analysis that makes its payload, with the route's cache policy and
the errors it turns into 400/404/422. `registry.py` names them in the specs.
"""


from __future__ import annotations

import math
import os
from typing import Any, Optional

from ..analysis.compiled import build_compiled
from ..analysis.diff import UnknownDiffPathError, build_diff
from ..analysis.diff_kernels import build_diff_kernels
from ..analysis.dist_run import as_summary
from ..analysis.dist_timeline import RankChoiceError, build_rank_timeline, chosen_workers
from ..analysis.gpu_idle import (
    build_gpu_idle,
)
from ..analysis.kernels import build_kernel_pies, build_kernels
from ..analysis.memory import UnknownDeviceError, build_memory
from ..analysis.memory_snapshot import (
    UnknownSnapshotDeviceError,
    build_memory_snapshot,
    overlaps_trace,
)
from ..analysis.memory_timeline import build_memory_timeline, build_memory_timeline_for
from ..analysis.modules import build_modules
from ..analysis.operators import (
    UnknownOperatorError,
    build_call_stacks,
    build_operator_pies,
    build_operators,
)
from ..analysis.overview import build_overview
from ..analysis.report import build_distributed_view
from ..analysis.roofline import build_roofline
from ..analysis.timeline import (
    build_timeline,
    event_details,
    search_timeline,
)
from ..analysis.timeline_counters import timeline_extras
from ..analysis.timeline_range import build_timeline_range
from ..analysis.whatif import EditError, StepNotFound, build_whatif, parse_edits
from ..ingest.memory_export import RawTimeline
from ..ingest.snapshot import Snapshot, SnapshotError
from ..load import load_memory_export, load_snapshot
from ..storage import NotRegularFile, OutsideLogdir
from .errors import NotInTrace, OptionError, Unreadable
from .option_types import (
    DiffKernelOptions,
    DiffOptions,
    EventOptions,
    GpuIdleOptions,
    KernelOptions,
    KernelPieOptions,
    MemoryOptions,
    OperatorOptions,
    OperatorPieOptions,
    OperatorStackOptions,
    RangeOptions,
    RanksOptions,
    SearchOptions,
    SnapshotOptions,
    TimelineOptions,
    WhatIfOptions,
)
from .options import NoOptions
from .spec import DISK, MEMORY


def overview(table: Any, _options: NoOptions) -> Any:
    return build_overview(table)


def operators(table: Any, options: OperatorOptions) -> Any:
    return build_operators(table, group_by=options.group_by)


def operator_pies(table: Any, options: OperatorPieOptions) -> Any:
    return build_operator_pies(table, options.top_n, options.group_by)


def operator_stack(table: Any, options: OperatorStackOptions) -> Any:
    shape = options.input_shape
    if shape is not None and options.group_by != "operator_input_shape":
        raise OptionError("input_shape is only meaningful with group_by=operator_input_shape")
    try:
        return build_call_stacks(table, options.name, shape, options.group_by)
    except UnknownOperatorError as exc:
        shown = options.name[:120] + (f" with input shape {shape[:120]}" if shape else "")
        raise NotInTrace(f"no operator {shown!r} in this worker span") from exc


def kernels(table: Any, options: KernelOptions) -> Any:
    return build_kernels(table, group_by=options.group_by)


def kernel_pies(table: Any, options: KernelPieOptions) -> Any:
    return build_kernel_pies(table, options.top_n)


def compiled(table: Any, _options: NoOptions) -> Any:
    return build_compiled(table)


def roofline(table: Any, _options: NoOptions) -> Any:
    return build_roofline(table)


def warm_timeline(table: Any) -> None:
    """The timeline index and counter tracks of a table (seconds on a big trace, then memoised
    on the table): run in the background when a table is read, and before timeline requests."""
    timeline_extras(table)  # builds the index first


def timeline(table: Any, options: TimelineOptions) -> Any:
    try:
        return build_timeline(table, options.start_us, options.end_us, options.width,
                              options.critical_step)
    except ValueError as exc:  # an empty or inverted window
        raise OptionError(str(exc)) from exc
    except KeyError as exc:
        raise NotInTrace(f"no step {options.critical_step[:120]!r} in this worker span"
                         ) from exc


def timeline_event(table: Any, options: EventOptions) -> Any:
    try:
        return event_details(table, options.event_id)
    except KeyError as exc:
        raise NotInTrace(f"no event {options.event_id} in this worker span") from exc


def timeline_search(table: Any, options: SearchOptions) -> Any:
    return search_timeline(table, options.query, limit=options.limit, start_us=options.start_us)


def timeline_range(table: Any, options: RangeOptions) -> Any:
    text = options.tracks  # matches TrackList's pattern (checked by `read_options`)
    tracks = None if text is None else [int(part) for part in text.split(",")]
    try:
        return build_timeline_range(table, options.start_us, options.end_us, tracks)
    except ValueError as exc:  # an empty or inverted range, an unknown track
        raise OptionError(str(exc)) from exc


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


def modules(table: Any, _options: NoOptions) -> Any:
    payload = build_modules(table)
    if not payload.get("available"):
        raise NotInTrace(payload.get("message") or "no module events in this worker span")
    return payload


def distributed(inputs: dict[str, Any], skipped: dict[str, str], _options: NoOptions) -> Any:
    return build_distributed_view(inputs, skipped)  # tables, or summaries (`summary_builtins`)


def _rank_list(options: RanksOptions) -> Optional[list[int]]:
    return None if options.ranks is None else [int(r) for r in options.ranks.split(",")]


def _offset_map(options: RanksOptions) -> dict[int, float]:
    out: dict[int, float] = {}
    for pair in (options.offsets or "").split(",") if options.offsets else []:
        rank, _, value = pair.partition(":")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not math.isfinite(number) or abs(number) > 1e12:
            raise OptionError(f"parameter 'offsets': bad offset {pair[:40]!r} (rank:us)")
        out[int(rank)] = number
    return out


def ranks_tables(inputs: dict[str, Any], options: RanksOptions) -> list[str]:
    """The workers whose tables the multi-rank timeline also reads (the chosen ranks)."""
    try:
        return chosen_workers({w: as_summary(v) for w, v in inputs.items()}, _rank_list(options))
    except RankChoiceError as exc:
        raise OptionError(str(exc)) from exc


def ranks_timeline(inputs: dict[str, Any], _skipped: dict[str, str], options: RanksOptions,
                   tables: Optional[dict[str, Any]] = None) -> Any:
    """`inputs` are summaries (the server, with the chosen `tables`) or tables (`build_view`)."""
    tables = inputs if tables is None else tables
    summaries = {w: as_summary(v) for w, v in inputs.items()}
    try:
        return build_rank_timeline(summaries, tables, ranks=_rank_list(options),
                                   start_us=options.start_us, end_us=options.end_us,
                                   width=options.width, offsets=_offset_map(options),
                                   host=options.host == "on")
    except ValueError as exc:  # RankChoiceError, or an empty or inverted window
        raise OptionError(str(exc)) from exc


def gpu_idle(table: Any, options: GpuIdleOptions) -> Any:
    return build_gpu_idle(table, options.kernel_wait_us, options.runtime_cutoff_us,
                          options.delay_cutoff_us, options.queue_full, options.step)


def diff_kernels(base: Any, exp: Any, options: DiffKernelOptions) -> Any:
    return build_diff_kernels(base, exp, options.group_by, options.basis)


def diff(base: Any, exp: Any, options: DiffOptions) -> Any:
    try:
        return build_diff(base, exp, options.path, options.basis)
    except UnknownDiffPathError as exc:
        raise NotInTrace(str(exc.args[0] if exc.args else "no such diff node")[:300]) from exc


def whatif(table: Any, options: WhatIfOptions) -> Any:
    try:
        edits = parse_edits(options.edit)
    except EditError as exc:
        raise OptionError(str(exc)) from exc
    try:
        return build_whatif(table, edits, options.step)
    except StepNotFound as exc:
        raise NotInTrace(str(exc)) from exc
