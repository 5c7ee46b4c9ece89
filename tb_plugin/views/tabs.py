"""The views (tabs) of the UI, and which ones a file or a run offers.

A `View` is a tab: its name (as the UI shows it and sends back in `workers?view=`), its display
order, whether it covers the whole run, and predicates on the per-file features that
`analysis.features.summarize` computes in the parser processes. The routes that serve a view's
data are `ViewSpec`s (`registry.py`), each naming its `View`.

Predicates:
- Overview, Operator, Trace: every parsed file.
- Kernel: the file ran GPU kernels.
- Memory: the file has `[memory]` events or a memory-timeline export (`*.raw.json.gz`) pairs with
  it (see `memory_timeline.matching_timeline`); also a run with exports and no trace file at
  all (not one whose traces are still loading); also a file whose run holds an allocator
  snapshot (`*.pickle`, `*snapshot*.pkl`), and a run with snapshots and no trace.
- Distributed: run-level; at least one worker has communication ops (`breakdown.comm_op_mask`).
- Module: every parsed file, like Overview. A trace without module events (`nn.Module`
  python_function events with a module id, or Lightning `[pl][module]` ops) keeps the tab, which
  explains how to record them (`/modules` answers 404 with that explanation): a tab that
  vanishes tells the user nothing. `has_modules` is still what the file's features say.
- GPU Idle: every parsed file (a trace without device work says what does not apply).
- Inference: the file has vLLM/SGLang serving step annotations (`serving_steps`,
  `analysis.inference.annotations`): a serving trace.
- Diff: run-level; the run has two usable traces (spans or workers) to compare, or another run
  of the logdir has one. The run list is global, so a single-trace run still offers Diff when
  there is another run to compare it with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional

from ..analysis.features import Features


@dataclass(frozen=True)
class RunFacts:
    """What a run-level predicate may know besides the features of the run's usable files."""

    usable_runs: int = 1  # runs of the logdir with at least one usable file (this one included)
    memory_exports: int = 0  # memory-timeline exports in the run's folder
    memory_snapshots: int = 0  # allocator snapshots in the run's folder
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


def _always(_features: Features) -> bool:
    return True


def _has_kernels(features: Features) -> bool:
    return int(features.get("kernels") or 0) > 0


def _count(features: Features, name: str) -> int:
    return int(features.get(name) or 0)


def _has_memory(features: Features) -> bool:
    return _count(features, "memory_events") > 0 or bool(features.get("memory_timeline")) \
        or bool(features.get("memory_snapshot"))


def _run_has_memory(files: Sequence[Features], facts: RunFacts) -> bool:
    memory_files_only = facts.trace_files == 0 and (facts.memory_exports > 0
                                                    or facts.memory_snapshots > 0)
    return memory_files_only or any(_has_memory(f) for f in files)


def _run_has_comm(files: Sequence[Features], _facts: RunFacts) -> bool:
    return any(_count(f, "comm_ops") > 0 for f in files)


def has_modules(features: Features) -> bool:
    """The file has module events (the Module tab shows them rather than the explanation)."""
    return _count(features, "module_events") > 0


def _is_serving(features: Features) -> bool:
    return _count(features, "serving_steps") > 0


def _run_can_diff(files: Sequence[Features], facts: RunFacts) -> bool:
    return bool(files) and (len(files) >= 2 or facts.usable_runs >= 2)


#: Every view, in display order (`/views`, `/viewspecs`).
VIEWS: dict[str, View] = {view.name: view for view in sorted((
    View("Overview", 1, _always),
    View("Operator", 2, _always),
    View("Kernel", 3, _has_kernels),
    View("Trace", 4, _always),
    View("Memory", 5, _has_memory, _run_has_memory),
    View("Distributed", 6, _always, _run_has_comm, run_level=True),
    View("Module", 7, _always),
    View("Diff", 8, _always, _run_can_diff, run_level=True),
    View("GPU Idle", 9, _always),
    View("Inference", 10, _is_serving),
), key=lambda view: view.order)}


def views_of_file(features: Features) -> list[str]:
    """Per-file views one parsed file offers (run-level views are not per file)."""
    return [v.name for v in VIEWS.values()
            if not v.run_level and v.available(features)]


def views_of_run(files: Sequence[Features], facts: Optional[RunFacts] = None) -> list[str]:
    """Views the run offers given its usable files' features, in display order."""
    facts = facts or RunFacts()
    names = []
    for view in VIEWS.values():
        if view.run_available is not None:
            ok = view.run_available(files, facts)
        else:
            ok = any(view.available(f) for f in files)
        if ok:
            names.append(view.name)
    return names


def view_specs() -> dict[str, list[dict[str, object]]]:
    """The `/viewspecs` answer: every view in display order, for the frontend's registry."""
    return {"views": [{"name": v.name, "order": v.order, "run_level": v.run_level}
                      for v in VIEWS.values()]}
