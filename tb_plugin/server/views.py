"""The registry of views, and the small per-file summary that decides which views a run has.

A parser process computes `summarize(table)` once per file; the server keeps only that (a few
numbers) for every file, so `/runs` and `/views` never need a parsed table in memory. A view
registers a predicate on one file's features, and optionally a run-level predicate on the
features of all the run's usable files plus a few facts about the run and the logdir
(`RunFacts`). Run-level views (Distributed, Diff) cover the whole run: any usable file offers
them once the run does.

Predicates:
- Overview, Operator, Trace: every parsed file.
- Kernel: the file ran GPU kernels.
- Memory: the file has `[memory]` events or a memory-timeline export (`*.raw.json.gz`) pairs with
  it (see `memory_timeline.matching_timeline`); also a run with exports and no trace file at
  all (not one whose traces are still loading).
- Distributed: run-level; at least one worker has communication ops (`breakdown.comm_op_mask`).
- Module: the file has module events (`nn.Module` python_function events with a module id, or
  Lightning `[pl][module]` ops); `build_modules()["available"]` decides at request time.
- Diff: run-level; the run has two usable traces (spans or workers) to compare, or another run
  of the logdir has one. The run list is global, so a single-trace run still offers Diff when
  there is another run to compare it with.

This module is imported by the parser processes: keep it free of TensorBoard imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

#: Bumped when `features()` changes, so summaries cached on disk are recomputed.
FEATURES_VERSION = 2

Features = dict[str, Any]


@dataclass(frozen=True)
class RunFacts:
    """What a run-level predicate may know besides the features of the run's usable files."""

    usable_runs: int = 1  # runs of the logdir with at least one usable file (this one included)
    memory_exports: int = 0  # memory-timeline exports in the run's folder
    trace_files: int = 1  # the run's trace files, whatever their state (0: exports only)


RunPredicate = Callable[[Sequence[Features], RunFacts], bool]


@dataclass(frozen=True)
class View:
    name: str  # display name, as the UI shows it and sends back in `workers?view=`
    order: int  # position in `/views` (the reference's order: Overview, Operator, Kernel, ...)
    available: Callable[[Features], bool]  # does one parsed file offer this view?
    #: Optional run-level test (replaces "some file offers it") on all usable files and facts.
    run_available: Optional[RunPredicate] = None
    #: The view covers the whole run (Distributed, Diff): not a per-file view.
    run_level: bool = False


VIEWS: dict[str, View] = {}


def register_view(view: View) -> None:
    VIEWS[view.name] = view


def _always(_features: Features) -> bool:
    return True


def _has_kernels(features: Features) -> bool:
    return int(features.get("kernels") or 0) > 0


def _count(features: Features, name: str) -> int:
    return int(features.get(name) or 0)


def _has_memory(features: Features) -> bool:
    return _count(features, "memory_events") > 0 or bool(features.get("memory_timeline"))


def _run_has_memory(files: Sequence[Features], facts: RunFacts) -> bool:
    exports_only = facts.trace_files == 0 and facts.memory_exports > 0
    return exports_only or any(_has_memory(f) for f in files)


def _run_has_comm(files: Sequence[Features], _facts: RunFacts) -> bool:
    return any(_count(f, "comm_ops") > 0 for f in files)


def _has_modules(features: Features) -> bool:
    return _count(features, "module_events") > 0


def _run_can_diff(files: Sequence[Features], facts: RunFacts) -> bool:
    return bool(files) and (len(files) >= 2 or facts.usable_runs >= 2)


register_view(View("Overview", 1, _always))
register_view(View("Operator", 2, _always))
register_view(View("Kernel", 3, _has_kernels))
register_view(View("Trace", 4, _always))
register_view(View("Memory", 5, _has_memory, _run_has_memory))
register_view(View("Distributed", 6, _always, _run_has_comm, run_level=True))
register_view(View("Module", 7, _has_modules))
register_view(View("Diff", 8, _always, _run_can_diff, run_level=True))


def views_of_file(features: Features) -> list[str]:
    """Per-file views one parsed file offers (run-level views are not per file)."""
    return [v.name for v in sorted(VIEWS.values(), key=lambda v: v.order)
            if not v.run_level and v.available(features)]


def views_of_run(files: Sequence[Features], facts: Optional[RunFacts] = None) -> list[str]:
    """Views the run offers given its usable files' features, in display order."""
    facts = facts or RunFacts()
    names = []
    for view in sorted(VIEWS.values(), key=lambda v: v.order):
        if view.run_available is not None:
            ok = view.run_available(files, facts)
        else:
            ok = any(view.available(f) for f in files)
        if ok:
            names.append(view.name)
    return names


def features(table: Any) -> Features:
    """Counts the view predicates need, from a parsed `TraceTable`."""
    from ..ingest.schema import Kind

    kinds = table.events["kind"].to_numpy()
    return {
        **_analysis_counts(table),
        "events": int(table.event_count),
        "cpu_ops": int((kinds == Kind.CPU_OP).sum()),
        "kernels": int((kinds == Kind.KERNEL).sum()),
        "memcpy": int((kinds == Kind.MEMCPY).sum()),
        "memset": int((kinds == Kind.MEMSET).sum()),
        "python_functions": int((kinds == Kind.PYTHON_FUNCTION).sum()),
        "memory_events": int(len(table.memory)),
        "flows": int(len(table.flows)),
        "distributed": table.metadata.distributed_info is not None,
        "framework": table.metadata.framework,
    }


def _analysis_counts(table: Any) -> Features:
    """Communication ops and module events (name and argument scans, no op tree)."""
    import numpy as np

    from ..analysis.breakdown import comm_op_mask

    events = table.events
    module_ids = table.python_args.get("python_module_id")
    python_modules = 0 if module_ids is None else int(np.isfinite(
        module_ids.to_numpy(dtype=np.float64, na_value=np.nan)).sum())
    names = events["name"]
    pl = np.flatnonzero(names.cat.categories.astype(str).str.startswith("[pl][module]"))
    lightning = int(np.isin(names.cat.codes.to_numpy(), pl).sum()) if pl.size else 0
    return {"comm_ops": int(comm_op_mask(events).sum()),
            "module_events": python_modules + lightning}


def summarize(table: Any) -> dict[str, Any]:
    """What the server keeps about one parsed file: state, messages, counts, features."""
    status = table.status
    return {
        "state": status.state,
        "messages": list(status.messages),
        "events": int(table.event_count),
        "features": features(table),
    }
