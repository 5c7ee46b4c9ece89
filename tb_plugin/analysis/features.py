"""The small per-file summary that decides which views a file offers (`tb_plugin.views`).

A parser process computes `summarize(table)` once per file; the server keeps only that (a few
numbers) for every file, so `/runs` and `/views` never need a parsed table in memory. This
module runs in the parser processes: it imports analysis and ingest code only.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, TypedDict

import numpy as np

from ..ingest.schema import Kind, TraceTable
from .breakdown import comm_op_mask
from .inference.annotations import serving_annotation_mask

#: Bumped when `features()` changes, so summaries cached on disk are recomputed.
FEATURES_VERSION = 4
#: At most this many distinct operator names are kept per file (the Diff view's default
#: experiment compares runs by them; sorted, so a cut is the same for every file).
MAX_OPERATOR_NAMES = 2000

Features = dict[str, Any]


class FeatureCounts(TypedDict):
    """`features()`: the counts the view predicates read (events, except the last two)."""

    comm_ops: int
    module_events: int
    events: int
    cpu_ops: int
    kernels: int
    memcpy: int
    memset: int
    python_functions: int
    memory_events: int
    flows: int
    serving_steps: int  # vLLM/SGLang serving step annotations (the Inference tab)
    distributed: bool  # the trace has distributedInfo
    framework: Optional[str]  # the trace's "Framework" field


class FileSummary(TypedDict):
    """`summarize()`: what the server keeps about one parsed file (also stored in the cache,
    and validated against this type when read back)."""

    state: Literal["ok", "partial", "truncated", "error"]
    messages: list[str]
    events: int
    features: FeatureCounts


def features(table: TraceTable) -> Features:
    """Counts the view predicates need, from a parsed `TraceTable`."""
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
        "serving_steps": int(serving_annotation_mask(table).sum()),
        "distributed": table.metadata.distributed_info is not None,
        "framework": table.metadata.framework,
        "operator_names": _operator_names(table, kinds),
    }


def _operator_names(table: TraceTable, kinds: np.ndarray) -> list[str]:
    """Distinct cpu_op names, sorted, at most MAX_OPERATOR_NAMES."""
    codes = np.unique(table.events["name"].cat.codes.to_numpy()[kinds == Kind.CPU_OP])
    names = table.events["name"].cat.categories.to_numpy()[codes[codes >= 0]]
    return sorted(str(n) for n in names)[:MAX_OPERATOR_NAMES]


def _analysis_counts(table: TraceTable) -> Features:
    """Communication ops and module events (name and argument scans, no op tree)."""
    events = table.events
    # the column is always there (float64, NaN where a call has no module id: ingest.schema)
    python_modules = int(np.isfinite(table.python_args["python_module_id"].to_numpy()).sum())
    names = events["name"]
    pl = np.flatnonzero(names.cat.categories.astype(str).str.startswith("[pl][module]"))
    lightning = int(np.isin(names.cat.codes.to_numpy(), pl).sum())  # 0 when pl is empty
    return {"comm_ops": int(comm_op_mask(events).sum()),
            "module_events": python_modules + lightning}


def summarize(table: TraceTable) -> FileSummary:
    """What the server keeps about one parsed file: state, messages, counts, features."""
    status = table.status
    return {
        "state": status.state,
        "messages": list(status.messages),
        "events": int(table.event_count),
        "features": features(table),
        # it may still be being written (`ParseStatus.cut_off`): the server waits for it
        "cut_off": bool(status.cut_off),
    }
