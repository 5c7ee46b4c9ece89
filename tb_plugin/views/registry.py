"""The registry: one `ViewSpec` per data route, in the order the CLI lists them.

Adding a view costs one spec here (plus its `View` in `tabs.py` if it is a new tab), its
analysis module, and its frontend folder: the server's routes, the CLI's `report --view` names
and flags, and `openapi.yaml` (`python -m tb_plugin.views.openapi`) follow from the spec.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..analysis.dist_summary import RankSummary, summary_builtins, wants_summary
from ..output import rows
from ..payloads import (
    CallStacksPayload,
    CompiledPayload,
    DiffKernelsPayload,
    DiffPayload,
    DistributedPayload,
    GpuIdlePayload,
    KernelPiesPayload,
    KernelsPayload,
    MemoryPayload,
    MemorySnapshotPayload,
    MemoryTimelinePayload,
    ModulesPayload,
    OperatorPiesPayload,
    OperatorsPayload,
    OverviewPayload,
    RanksTimelinePayload,
    RooflinePayload,
    TimelineEventPayload,
    TimelinePayload,
    TimelineRangePayload,
    TimelineSearchPayload,
)
from . import builders as build
from .errors import OptionError
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
)
from .options import option_fields
from .spec import EXPORT, PAIR, SNAPSHOT, SPAN, ViewSpec, never

# -- the specs ------------------------------------------------------------------------------------

_TIMELINE = {"cache": never, "prepare": build.warm_timeline}

SPECS: dict[str, ViewSpec] = {spec.name: spec for spec in (
    ViewSpec("overview", "/overview", "Overview", build.overview,
             payload=OverviewPayload, rows=rows.overview_rows,
             summary="Overview of a worker span (steps, step-time breakdown, GPUs, "
                     "recommendations).",
             description="Shape: see `tb_plugin.analysis.overview.build_overview`. With "
                         "`format=csv`, the per-step breakdown table."),
    ViewSpec("operators", "/operators", "Operator", build.operators,
             payload=OperatorsPayload, options=OperatorOptions,
             rows=rows.whole_payload,
             summary='Operator table (`{"rows": [...], "sort_by", "has_device", ...}`).'),
    ViewSpec("operator_pies", "/operators/pies", "Operator", build.operator_pies,
             payload=OperatorPiesPayload,
             options=OperatorPieOptions, rows=rows.whole_payload,
             summary="Top-N operator pies (device/host, self/total time)."),
    ViewSpec("operator_stack", "/operators/stack", "Operator", build.operator_stack,
             payload=CallStacksPayload,
             options=OperatorStackOptions, rows=rows.whole_payload,
             summary="The call stacks of one operator (one row per distinct stack).",
             errors={"404": "Unknown run/worker/span, or no such operator in this worker "
                            "span."}),
    ViewSpec("kernels", "/kernels", "Kernel", build.kernels,
             payload=KernelsPayload, options=KernelOptions,
             rows=rows.whole_payload,
             summary='GPU kernel table (`{"rows": [...]}`); 404 when the worker ran no '
                     'kernel.'),
    ViewSpec("kernel_pies", "/kernels/pies", "Kernel", build.kernel_pies,
             payload=KernelPiesPayload, options=KernelPieOptions,
             rows=rows.whole_payload,
             summary="Top-N kernel pie and tensor-core share; 404 when the worker ran no "
                     "kernel."),
    ViewSpec("compiled", "/compiled", "Operator", build.compiled,
             payload=CompiledPayload, rows=rows.whole_payload,
             summary="torch.compile regions -> Inductor kernels (source file, hash, backend) "
                     "-> device time, guard and launch overhead, extern ops.",
             description="A section of the Operator view (always offered: a CPU run has "
             "compiled regions but no\nKernel view). Shape: see "
             "`tb_plugin.analysis.compiled.build_compiled`."),
    ViewSpec("roofline", "/roofline", "Operator", build.roofline,
             payload=RooflinePayload, rows=rows.whole_payload,
             summary="FLOPs and bytes per operator, the precision it ran in, achieved TFLOP/s "
                     "and TB/s, arithmetic intensity, compute/memory bound, MBU, above-roof "
                     "flags, and MFU and MBU per step.",
             description="A section of the Operator view. The device's peaks come from the "
             "documented table in\n`tb_plugin.analysis.hardware`. Shape: see "
             "`tb_plugin.analysis.roofline.build_roofline`."),
    ViewSpec("timeline", "/timeline", "Trace", build.timeline,
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
    ViewSpec("timeline_event", "/timeline/event", "Trace", build.timeline_event,
             payload=TimelineEventPayload,
             options=EventOptions, **_TIMELINE,
             summary="Everything known about one event (Trace view details panel).",
             description="Its columns and arguments, where it is drawn (track, depth, "
             "parent), its correlation\npartners (launch <-> kernel/memcpy/memset) and the "
             "flows that end on it. See\n`tb_plugin.analysis.timeline.event_details`. JSON "
             "only.",
             errors={"404": "Unknown run/worker/span, or no event with that id."}),
    ViewSpec("timeline_search", "/timeline/search", "Trace", build.timeline_search,
             payload=TimelineSearchPayload,
             options=SearchOptions, rows=rows.search_rows, **_TIMELINE,
             summary="Events whose name contains `q` (case-insensitive), in time order.",
             description='`{"query", "total", "limit", "truncated", "names", "name_count", '
             '"matches": [{"id",\n"name", "track", "depth", "ts", "dur"}]}` (`ts` in trace '
             'us). With `format=csv`, the\nmatches.'),
    ViewSpec("timeline_range", "/timeline/range", "Trace", build.timeline_range,
             payload=TimelineRangePayload, options=RangeOptions, rows=rows.payload_rows,
             **_TIMELINE,
             summary="Counts, total and self time by event name inside a time range, on "
                     "chosen tracks (Trace view's range selection).",
             description="Events overlapping [start_us, end_us] (trace us) on `tracks`; "
             "times are clipped to the\nrange, self time subtracts the direct children's. "
             "Computed per request from the timeline\nindex. Shape: see "
             "`tb_plugin.analysis.timeline_range.build_timeline_range`. With\n`format=csv`, "
             "the rows.",
             errors={"400": "Bad parameter, an empty or inverted range, or an unknown track "
                            "id."}),
    ViewSpec("memory", "/memory", "Memory", build.memory,
             payload=MemoryPayload, options=MemoryOptions,
             rows=rows.memory_rows, cache=build.memory_cache,
             summary="Memory view of a worker span (curves, peaks, alloc/free pairs, "
                     "operators, leaks).",
             description="Shape: see `tb_plugin.analysis.memory.build_memory`. `device` "
             "restricts curves and tables\nto one device of `devices`; [start_us, end_us] "
             "(trace us) selects a range. With\n`format=csv`, the per-operator statistics "
             "then the allocation/free pairs, with a `table`\ncolumn (`operators` / "
             "`events`).",
             errors={"404": "Unknown run/worker/span, no Memory view there, or no records of "
                            "`device`."}),
    ViewSpec("memory_timeline", "/memory/timeline", "Memory", build.memory_timeline,
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
    ViewSpec("memory_snapshot", "/memory/snapshot", "Memory", build.memory_snapshot,
             payload=MemorySnapshotPayload, kind=SNAPSHOT, options=SnapshotOptions,
             rows=rows.memory_snapshot_rows, cache=build.snapshot_cache,
             summary="An allocator snapshot (`torch.cuda.memory._dump_snapshot` pickle) of the "
                     "run: curves, segments at an instant, top allocations.",
             description="The run's snapshots are `*.pickle` and `*snapshot*.pkl` files; they "
             "are read with an\nunpickler that builds plain data only (dicts, lists, tuples, "
             "strings, numbers, None):\nanything else is refused with 422 and nothing from the "
             "file runs. With worker and span,\ntimes are on that trace's clock when the "
             "snapshot overlaps its period. Shape: see\n"
             "`tb_plugin.analysis.memory_snapshot.build_memory_snapshot`. With `format=csv`, the "
             "curve\n(`t`, `allocated`, `reserved`).",
             errors={"404": "Unknown run/worker/span, no snapshot in the run, or no such "
                            "snapshot or device.",
                     "422": "The snapshot was refused (not plain data, over "
                            "TORCH_PROF_SNAPSHOT_MAX_MB) or is not a snapshot."}),
    ViewSpec("modules", "/modules", "Module", build.modules,
             payload=ModulesPayload, rows=rows.module_rows,
             summary="Module view (nn.Module hierarchy with stats, flame graph, backward "
                     "attribution).",
             description="Shape: see `tb_plugin.analysis.modules.build_modules`. 404 (with "
             "the reason) when the\nmodule hierarchy cannot be built. With `format=csv`, the "
             "module tree depth first, one row\nper module with its `key` and `depth`."),
    ViewSpec("distributed", "/distributed", "Distributed", build.distributed,
             payload=DistributedPayload, kind=SPAN,
             summarize=summary_builtins, summary_wanted=wants_summary,
             summary_type=RankSummary,
             rows=rows.distributed_rows,
             summary="Distributed view of one span over all workers of the run.",
             description="Span ids are per-worker indices (`1`, `2`, ...): workers are matched "
             "by the same id.\nWorkers whose file of that span is broken, or that have no such "
             "span, are left out and\nnamed in `skipped` and `messages`; 202 while any "
             "worker's file of that span is still\nloading. Shape: see "
             "`tb_plugin.analysis.dist_run.build_distributed`, plus `skipped:\n{worker: "
             "reason}`, built from one small summary per worker. With `format=csv`, the\n"
             "communication-op rows with a `worker` column.",
             errors={"404": "Unknown run or span, or the run has no Distributed view."}),
    ViewSpec("ranks", "/ranks", "Distributed", build.ranks_timeline,
             payload=RanksTimelinePayload, kind=SPAN, options=RanksOptions,
             summarize=summary_builtins, summary_wanted=wants_summary,
             span_tables=build.ranks_tables, cache=never, prepare=build.warm_timeline,
             summary="All ranks on one timeline: chosen ranks' GPU streams (and host threads) "
                     "stacked on the run clock, with the matched collectives as links.",
             description="A window [start_us, end_us] of the run clock (a rank's trace us minus "
             "its clock offset,\nestimated from collective ends as `/distributed` "
             "`clocks.offsets_us`, or given by `offsets`)\ndrawn `width` pixels wide, for at "
             "most 8 ranks (default the first 8): each rank's level of\ndetail is its "
             "`/timeline` answer for that window shifted to its clock. Shape: see\n"
             "`tb_plugin.analysis.dist_timeline.build_rank_timeline`. Computed per request from "
             "the ranks'\nsummaries and the chosen ranks' timeline indexes. JSON only.",
             errors={"400": "Bad parameter, an unknown rank, more than 8 ranks, an offset for "
                            "a rank not shown, or an empty or inverted window.",
                     "404": "Unknown run or span, or the run has no Distributed view."}),
    ViewSpec("gpu_idle", "/gpu_idle", "GPU Idle", build.gpu_idle,
             payload=GpuIdlePayload, options=GpuIdleOptions, rows=rows.gpu_idle_rows,
             summary="Why the GPU is idle: temporal and idle-time breakdowns, launch "
                     "statistics, queue lengths, bandwidth, kernel sequences, annotations, "
                     "critical path, recommendations.",
             description="Shape: see `tb_plugin.payloads.gpu_idle.GpuIdlePayload`; each "
             "analysis states its formula in\n`formulas`. A trace without device work answers "
             "`applicable: false` with a message. With\n`format=csv`, one row per table entry "
             "with a `table` column (`temporal`, `idle`, `queue`,\n`launch`, `sequences`, "
             "`annotations`, `critical_path`)."),
    ViewSpec("diff", "/diff", "Diff", build.diff,
             payload=DiffPayload, kind=PAIR, options=DiffOptions,
             rows=rows.diff_rows,
             summary="One node of the diff of two worker spans (base vs experiment), with "
                     "children.",
             description="Both sides are looked up among the discovered names; 202 while "
             "either is loading.\n`path` is a node path from the payload (`0` the root, `0-1` "
             "its second child, ...).\nShape: see `tb_plugin.analysis.diff.build_diff`. With "
             "`format=csv`, the operator deltas.",
             errors={"404": "Unknown run/worker/span on either side, or no node at `path`."}),
    ViewSpec("diff_kernels", "/diff/kernels", "Diff", build.diff_kernels,
             payload=DiffKernelsPayload, kind=PAIR, options=DiffKernelOptions,
             rows=rows.payload_rows,
             summary="GPU kernels of two worker spans compared, by kernel name or by "
                     "operator -> kernel, sorted by |delta|.",
             description="Every kernel of both traces (all threads). Shape: see\n"
             "`tb_plugin.analysis.diff_kernels.build_diff_kernels`. With `format=csv`, the "
             "rows.",
             errors={"404": "Unknown run/worker/span on either side."}),
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
