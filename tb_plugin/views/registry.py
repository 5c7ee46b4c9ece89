"""The registry: one `ViewSpec` per data route, in the order the CLI lists them.

Adding a view costs one spec here (plus its `View` in `tabs.py` if it is a new tab), its
analysis module, and its frontend folder: the server's routes, the CLI's `report --view` names
and flags, and `openapi.yaml` (`python -m tb_plugin.views.openapi`) follow from the spec.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import msgspec
from msgspec import Meta

from ..analysis.diff import UnknownDiffPathError, build_diff
from ..analysis.kernels import build_kernel_pies, build_kernels
from ..analysis.memory import UnknownDeviceError, build_memory
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
from ..analysis.timeline import (
    DEFAULT_WIDTH,
    MAX_WIDTH,
    SEARCH_LIMIT,
    build_timeline,
    event_details,
    search_timeline,
)
from ..analysis.timeline_counters import timeline_extras
from ..ingest.memory_export import RawTimeline
from ..ingest.schema import MAX_TIME_US
from ..load import load_memory_export
from ..output import rows
from ..payloads import (
    CallStacksPayload,
    DiffPayload,
    DistributedPayload,
    KernelPiesPayload,
    KernelsPayload,
    MemoryPayload,
    MemoryTimelinePayload,
    ModulesPayload,
    OperatorPiesPayload,
    OperatorsPayload,
    OverviewPayload,
    TimelineEventPayload,
    TimelinePayload,
    TimelineSearchPayload,
)
from .errors import NotInTrace, OptionError
from .options import NoOptions, option_fields
from .spec import DISK, EXPORT, MEMORY, PAIR, SPAN, ViewSpec, never

MAX_TOP_N = 1_000_000
MAX_SEARCH_LIMIT = 10_000
MAX_EVENT_ID = 2**62

TopN = Optional[Annotated[int, Meta(ge=1, le=MAX_TOP_N, description=(
    "Number of slices (1 to 1000000); absent means all."))]]
#: Request times are bounded like the parser's (`MAX_TIME_US`): `1e308` answers 400, not 500.
TimeUs = Meta(ge=-MAX_TIME_US, le=MAX_TIME_US)
StartUs = Optional[Annotated[float, TimeUs, Meta(description=(
    "Range start, in trace microseconds (the `ts` clock of the trace)."))]]
EndUs = Optional[Annotated[float, TimeUs, Meta(description=(
    "Range end, in trace microseconds; must be greater than `start_us`."))]]
OperatorGroup = Literal["operator", "operator_input_shape"]


class OperatorOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"


class OperatorPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"
    top_n: TopN = None


class OperatorStackOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    group_by: OperatorGroup = "operator"
    name: Annotated[str, Meta(description="The operator name, as in the operator table.")]
    input_shape: Optional[Annotated[str, Meta(description=(
        "Only with `group_by=operator_input_shape`; the row's input shape."))]] = None


class KernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Literal["kernel", "kernel_op_launch"] = "kernel"


class KernelPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    top_n: TopN = None


class TimelineOptions(msgspec.Struct, forbid_unknown_fields=True):
    start_us: StartUs = None
    end_us: EndUs = None
    width: Annotated[int, Meta(ge=1, le=MAX_WIDTH, description=(
        "Pixels across the window."))] = DEFAULT_WIDTH


class EventOptions(msgspec.Struct, forbid_unknown_fields=True):
    event_id: Annotated[int, Meta(ge=0, le=MAX_EVENT_ID, description=(
        "An event id, as in the `id` lists of `/timeline` and `/timeline/search`."))
                        ] = msgspec.field(name="id")


class SearchOptions(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(description="Text in event names (case-insensitive).")
                     ] = msgspec.field(name="q")
    limit: Annotated[int, Meta(ge=1, le=MAX_SEARCH_LIMIT, description=(
        "Matches returned; `total` counts all of them."))] = SEARCH_LIMIT
    start_us: Optional[Annotated[float, TimeUs, Meta(description=(
        "Only matches starting at or after this trace time (to page on)."))]] = None


class MemoryOptions(msgspec.Struct, forbid_unknown_fields=True):
    device: Optional[Annotated[str, Meta(description=(
        "A device name from `devices` (e.g. `CPU`, `GPU0`)."))]] = None
    start_us: StartUs = None
    end_us: EndUs = None


class DiffOptions(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, Meta(description=(
        "A node path from the payload (`0` the root, `0-1` its second child, ...)."))] = "0"


# -- builders -------------------------------------------------------------------------------------


def _overview(table: Any, _options: NoOptions) -> Any:
    return build_overview(table)


def _operators(table: Any, options: OperatorOptions) -> Any:
    return build_operators(table, group_by=options.group_by)


def _operator_pies(table: Any, options: OperatorPieOptions) -> Any:
    return build_operator_pies(table, options.top_n, options.group_by)


def _operator_stack(table: Any, options: OperatorStackOptions) -> Any:
    shape = options.input_shape
    if shape is not None and options.group_by != "operator_input_shape":
        raise OptionError("input_shape is only meaningful with group_by=operator_input_shape")
    try:
        return build_call_stacks(table, options.name, shape, options.group_by)
    except UnknownOperatorError as exc:
        shown = options.name[:120] + (f" with input shape {shape[:120]}" if shape else "")
        raise NotInTrace(f"no operator {shown!r} in this worker span") from exc


def _kernels(table: Any, options: KernelOptions) -> Any:
    return build_kernels(table, group_by=options.group_by)


def _kernel_pies(table: Any, options: KernelPieOptions) -> Any:
    return build_kernel_pies(table, options.top_n)


def warm_timeline(table: Any) -> None:
    """The timeline index and counter tracks of a table (seconds on a big trace, then memoised
    on the table): run in the background when a table is read, and before timeline requests."""
    timeline_extras(table)  # builds the index first


def _timeline(table: Any, options: TimelineOptions) -> Any:
    try:
        return build_timeline(table, options.start_us, options.end_us, options.width)
    except ValueError as exc:  # an empty or inverted window
        raise OptionError(str(exc)) from exc


def _timeline_event(table: Any, options: EventOptions) -> Any:
    try:
        return event_details(table, options.event_id)
    except KeyError as exc:
        raise NotInTrace(f"no event {options.event_id} in this worker span") from exc


def _timeline_search(table: Any, options: SearchOptions) -> Any:
    return search_timeline(table, options.query, limit=options.limit, start_us=options.start_us)


def _memory(table: Any, options: MemoryOptions) -> Any:
    start, end = options.start_us, options.end_us
    if start is not None and end is not None and start >= end:
        raise OptionError(f"bad memory range [{start}, {end}]: need start_us < end_us")
    try:
        return build_memory(table, options.device, start, end)
    except UnknownDeviceError as exc:
        device = str(options.device)[:120]
        raise NotInTrace(f"no memory records of device {device!r} in this worker span"
                         ) from exc


def _memory_cache(options: MemoryOptions) -> str:
    """The full-range payload on disk; zoomed ranges (one key each) in memory only."""
    return DISK if options.start_us is None and options.end_us is None else MEMORY


def _memory_timeline(table: Optional[Any], export: Any, _options: NoOptions) -> Any:
    """The export (a FileRef or path, read through the cache, or already read records); on
    the trace's clock and steps when the span's table is given, else on its own."""
    raw = export if isinstance(export, RawTimeline) else load_memory_export(export)
    if table is None:
        return build_memory_timeline(raw)
    return build_memory_timeline_for(table, raw)


def _modules(table: Any, _options: NoOptions) -> Any:
    payload = build_modules(table)
    if not payload.get("available"):
        raise NotInTrace(payload.get("message") or "no module events in this worker span")
    return payload


def _distributed(tables: dict[str, Any], skipped: dict[str, str], _options: NoOptions) -> Any:
    return build_distributed_view(tables, skipped)


def _diff(base: Any, exp: Any, options: DiffOptions) -> Any:
    try:
        return build_diff(base, exp, options.path)
    except UnknownDiffPathError as exc:
        raise NotInTrace(str(exc.args[0] if exc.args else "no such diff node")[:300]) from exc


# -- the specs ------------------------------------------------------------------------------------

_TIMELINE = {"cache": never, "prepare": warm_timeline}

SPECS: dict[str, ViewSpec] = {spec.name: spec for spec in (
    ViewSpec("overview", "/overview", "Overview", _overview,
             payload=OverviewPayload, rows=rows.overview_rows,
             summary="Overview of a worker span (steps, step-time breakdown, GPUs, "
                     "recommendations).",
             description="Shape: see `tb_plugin.analysis.overview.build_overview`. With "
                         "`format=csv`, the per-step breakdown table."),
    ViewSpec("operators", "/operators", "Operator", _operators,
             payload=OperatorsPayload, options=OperatorOptions,
             rows=rows.whole_payload,
             summary='Operator table (`{"rows": [...], "sort_by", "has_device", ...}`).'),
    ViewSpec("operator_pies", "/operators/pies", "Operator", _operator_pies,
             payload=OperatorPiesPayload,
             options=OperatorPieOptions, rows=rows.whole_payload,
             summary="Top-N operator pies (device/host, self/total time)."),
    ViewSpec("operator_stack", "/operators/stack", "Operator", _operator_stack,
             payload=CallStacksPayload,
             options=OperatorStackOptions, rows=rows.whole_payload,
             summary="The call stacks of one operator (one row per distinct stack).",
             errors={"404": "Unknown run/worker/span, or no such operator in this worker "
                            "span."}),
    ViewSpec("kernels", "/kernels", "Kernel", _kernels,
             payload=KernelsPayload, options=KernelOptions,
             rows=rows.whole_payload,
             summary='GPU kernel table (`{"rows": [...]}`); 404 when the worker ran no '
                     'kernel.'),
    ViewSpec("kernel_pies", "/kernels/pies", "Kernel", _kernel_pies,
             payload=KernelPiesPayload, options=KernelPieOptions,
             rows=rows.whole_payload,
             summary="Top-N kernel pie and tensor-core share; 404 when the worker ran no "
                     "kernel."),
    ViewSpec("timeline", "/timeline", "Trace", _timeline,
             payload=TimelinePayload, options=TimelineOptions, **_TIMELINE,
             summary="Level-of-detail trace timeline of one window (Trace view).",
             description="Events at least a pixel wide, runs of narrower ones as counted "
             "blocks, step ranges, flow\narrows and counter tracks sampled per pixel, for the "
             "window [start_us, end_us] (trace\nus; default the whole trace) drawn `width` "
             "pixels wide. Shape: see\n`tb_plugin.analysis.timeline.build_timeline`; times in "
             "`tracks`, `steps`, `flows` and\n`counters` are us relative to `origin_us`. Under "
             "1 MB of JSON at any zoom. Computed per\nrequest (never cached); the per-file "
             "index it reads is built once, in the background as\nsoon as the file's table is "
             "read by the server. JSON only.",
             errors={"400": "Bad parameter, or an empty or inverted window (start_us >= "
                            "end_us)."}),
    ViewSpec("timeline_event", "/timeline/event", "Trace", _timeline_event,
             payload=TimelineEventPayload,
             options=EventOptions, **_TIMELINE,
             summary="Everything known about one event (Trace view details panel).",
             description="Its columns and arguments, where it is drawn (track, depth, "
             "parent), its correlation\npartners (launch <-> kernel/memcpy/memset) and the "
             "flows that end on it. See\n`tb_plugin.analysis.timeline.event_details`. JSON "
             "only.",
             errors={"404": "Unknown run/worker/span, or no event with that id."}),
    ViewSpec("timeline_search", "/timeline/search", "Trace", _timeline_search,
             payload=TimelineSearchPayload,
             options=SearchOptions, rows=rows.search_rows, **_TIMELINE,
             summary="Events whose name contains `q` (case-insensitive), in time order.",
             description='`{"query", "total", "limit", "truncated", "names", "name_count", '
             '"matches": [{"id",\n"name", "track", "depth", "ts", "dur"}]}` (`ts` in trace '
             'us). With `format=csv`, the\nmatches.'),
    ViewSpec("memory", "/memory", "Memory", _memory,
             payload=MemoryPayload, options=MemoryOptions,
             rows=rows.memory_rows, cache=_memory_cache,
             summary="Memory view of a worker span (curves, peaks, alloc/free pairs, "
                     "operators, leaks).",
             description="Shape: see `tb_plugin.analysis.memory.build_memory`. `device` "
             "restricts curves and tables\nto one device of `devices`; [start_us, end_us] "
             "(trace us) selects a range. With\n`format=csv`, the per-operator statistics "
             "then the allocation/free pairs, with a `table`\ncolumn (`operators` / "
             "`events`).",
             errors={"404": "Unknown run/worker/span, no Memory view there, or no records of "
                            "`device`."}),
    ViewSpec("memory_timeline", "/memory/timeline", "Memory", _memory_timeline,
             payload=MemoryTimelinePayload, kind=EXPORT,
             rows=rows.memory_timeline_rows,
             summary="Memory by category over time, from an `export_memory_timeline` raw "
                     "export.",
             description="With worker and span: the export written next to that span's trace"
             "\n(`<worker>.<ts>.raw.json.gz`), else the run's only export not named after a "
             "trace; times\non the trace clock and leak checks per profiler step. Without "
             "them: the run's only\nexport, on its own clock (for a run that holds an export "
             "but no trace; 400 when the run\nhas several). Shape: see "
             "`tb_plugin.analysis.memory_timeline.build_memory_timeline`.\nWith `format=csv`, "
             "one row per time point (`t_us`, one column per category, `total`).",
             errors={"404": "Unknown run/worker/span, or no export for it."}),
    ViewSpec("modules", "/modules", "Module", _modules,
             payload=ModulesPayload, rows=rows.module_rows,
             summary="Module view (nn.Module hierarchy with stats, flame graph, backward "
                     "attribution).",
             description="Shape: see `tb_plugin.analysis.modules.build_modules`. 404 (with "
             "the reason) when the\nmodule hierarchy cannot be built. With `format=csv`, the "
             "module tree depth first, one row\nper module with its `key` and `depth`."),
    ViewSpec("distributed", "/distributed", "Distributed", _distributed,
             payload=DistributedPayload, kind=SPAN,
             rows=rows.distributed_rows,
             summary="Distributed view of one span over all workers of the run.",
             description="Span ids are per-worker indices (`1`, `2`, ...): workers are matched "
             "by the same id.\nWorkers whose file of that span is broken, or that have no such "
             "span, are left out and\nnamed in `skipped` and `messages`; 202 while any "
             "worker's file of that span is still\nloading. Shape: see "
             "`tb_plugin.analysis.distributed.build_distributed`, plus `skipped:\n{worker: "
             "reason}`. With `format=csv`, the communication-op rows with a `worker` column.",
             errors={"404": "Unknown run or span, or the run has no Distributed view."}),
    ViewSpec("diff", "/diff", "Diff", _diff,
             payload=DiffPayload, kind=PAIR, options=DiffOptions,
             rows=rows.diff_rows,
             summary="One node of the diff of two worker spans (base vs experiment), with "
                     "children.",
             description="Both sides are looked up among the discovered names; 202 while "
             "either is loading.\n`path` is a node path from the payload (`0` the root, `0-1` "
             "its second child, ...).\nShape: see `tb_plugin.analysis.diff.build_diff`. With "
             "`format=csv`, the operator deltas.",
             errors={"404": "Unknown run/worker/span on either side, or no node at `path`."}),
)}

ROUTES: dict[str, ViewSpec] = {spec.route: spec for spec in SPECS.values()}


def build_view(first: Any, view: str, /, *more: Any, **options: Any) -> Any:
    """The payload of view spec `name`, options given by attribute name, for scripts, tests and
    benchmarks: `build_view(table, "timeline", width=500)`; `build_view(tables, "distributed",
    skipped)`; `build_view(base, "diff", exp, path="0-1")`; `build_view(table_or_none,
    "memory_timeline", export)`. Options are validated as the server validates them."""
    spec = SPECS[view]
    params = {field.attr: field.param for field in option_fields(spec.options)}
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise OptionError(f"{', '.join(unknown)} not taken by the {view} view")
    named = {params[attr]: value for attr, value in options.items()}
    return spec.build(first, *more, msgspec.convert(named, spec.options))
