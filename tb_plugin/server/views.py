"""The registry of views, and the small per-file summary that decides which views a run has.

A parser process computes `summarize(table)` once per file; the server keeps only that (a few
numbers) for every file, so `/runs` and `/views` never need a parsed table in memory. Later views
(Trace, Memory, Distributed, Module, Diff) register here with a predicate on those features, or
on all of a run's files for run-level views.

This module is imported by the parser processes: keep it free of TensorBoard imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

#: Bumped when `features()` changes, so summaries cached on disk are recomputed.
FEATURES_VERSION = 1

Features = dict[str, Any]


@dataclass(frozen=True)
class View:
    name: str  # display name, as the UI shows it and sends back in `workers?view=`
    order: int  # position in `/views` (the reference's order: Overview, Operator, Kernel, ...)
    available: Callable[[Features], bool]  # does one parsed file offer this view?
    #: Optional run-level test on the features of all usable files (e.g. Distributed needs 2+).
    run_available: Optional[Callable[[Sequence[Features]], bool]] = None


VIEWS: dict[str, View] = {}


def register_view(view: View) -> None:
    VIEWS[view.name] = view


def _always(_features: Features) -> bool:
    return True


def _has_kernels(features: Features) -> bool:
    return int(features.get("kernels") or 0) > 0


register_view(View("Overview", 1, _always))
register_view(View("Operator", 2, _always))
register_view(View("Kernel", 3, _has_kernels))


def views_of_file(features: Features) -> list[str]:
    return [v.name for v in sorted(VIEWS.values(), key=lambda v: v.order)
            if v.run_available is None and v.available(features)]


def views_of_run(files: Sequence[Features]) -> list[str]:
    """Views offered by at least one of the run's usable files, in display order."""
    names = []
    for view in sorted(VIEWS.values(), key=lambda v: v.order):
        if view.run_available is not None:
            ok = bool(files) and view.run_available(files)
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


def summarize(table: Any) -> dict[str, Any]:
    """What the server keeps about one parsed file: state, messages, counts, features."""
    status = table.status
    return {
        "state": status.state,
        "messages": list(status.messages),
        "events": int(table.event_count),
        "features": features(table),
    }
