"""Which events become operator-tree nodes, and of which kind (spec 3.1/3.2, 3.7).

Names are tested once per distinct name (`events.category_flags`).
"""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .events import DATALOADER_RE, category_flags


class NodeKind(IntEnum):
    ROOT = 0  # one per thread, spans its top-level nodes
    OPERATOR = 1  # cpu_op / Operator
    PROFILER_STEP = 2  # ProfilerStep#N (cpu_op or user_annotation)
    DATALOADER = 3  # enumerate(DataLoader)#...__next__, enumerate(DataPipe)#...
    OPTIMIZER = 4  # Optimizer.step*
    MODULE = 5  # python_function with a "Python module id" (nn.Module forward)
    USER_ANNOTATION = 6  # record_function ranges kept: the comm op names (as the reference),
    # and Inductor's "## Call CompiledFxGraph <hash> ##" (compiled regions,
    # analysis/efficiency/compiled)
    PYTHON = 7  # legacy `python` category
    PL_MODULE = 8  # Lightning "[pl][module]..." ops


COMM_OP_NAMES = frozenset(f"{lib}:{op}" for lib in ("nccl", "gloo") for op in (
    "broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter"))
#: Inductor's compiled-graph call, a user annotation (vLLM calls graphs without Dynamo).
FX_GRAPH_RE = re.compile(r"^## Call CompiledFxGraph \w+ ##$")
EXCLUDED_OP_NAMES = frozenset(("DataParallel.forward", "DistributedDataParallel.forward"))


def _name_flags(names: pd.Series, pattern: str) -> np.ndarray:
    regex = re.compile(pattern)
    return category_flags(names, lambda n: bool(regex.search(n)))


def node_kinds(table: TraceTable) -> np.ndarray:
    """NodeKind per event row, -1 for events that are not tree nodes (spec 3.1/3.2)."""
    events = table.events
    names = events["name"]
    kind = events["kind"].to_numpy()
    step = _name_flags(names, r"^ProfilerStep#")
    loader = category_flags(names, lambda n: bool(DATALOADER_RE.search(n)))
    optimizer = _name_flags(names, r"^Optimizer\.step")
    comm = category_flags(names, lambda n: n in COMM_OP_NAMES or bool(FX_GRAPH_RE.match(n)))
    out = np.full(len(events), -1, dtype=np.int8)

    cpu = kind == Kind.CPU_OP
    out[cpu] = NodeKind.OPERATOR
    out[cpu & optimizer] = NodeKind.OPTIMIZER
    out[cpu & loader] = NodeKind.DATALOADER
    out[cpu & step] = NodeKind.PROFILER_STEP
    annotation = kind == Kind.USER_ANNOTATION
    out[annotation & comm] = NodeKind.USER_ANNOTATION
    out[annotation & optimizer] = NodeKind.OPTIMIZER
    out[annotation & loader] = NodeKind.DATALOADER
    out[annotation & step] = NodeKind.PROFILER_STEP
    out[kind == Kind.PYTHON] = NodeKind.PYTHON
    if table.metadata.framework == "pytorch-lightning":
        out[cpu & _name_flags(names, r"^\[pl\]\[profile\]")] = -1  # the separate PL tree
        out[cpu & _name_flags(names, r"^\[pl\]\[module\]")] = NodeKind.PL_MODULE
    else:
        out[_module_rows(table)] = NodeKind.MODULE
    return out


def _module_rows(table: TraceTable) -> np.ndarray:
    args = table.python_args
    rows = args["event"].to_numpy()[np.isfinite(args["python_module_id"].to_numpy())]
    kind = table.events["kind"].to_numpy()
    return rows[kind[rows] == Kind.PYTHON_FUNCTION]


def operator_predicate(kind: np.ndarray, name_code: np.ndarray,
                        categories: pd.Index) -> np.ndarray:
    """Plain operators: not steps, modules, loaders, optimizers, annotations; not the
    (Distributed)DataParallel wrappers; not `Optimizer.*` (zero_grad)."""
    excluded = np.fromiter((str(c) in EXCLUDED_OP_NAMES or str(c).startswith("Optimizer.")
                            for c in categories), dtype=bool, count=len(categories))
    excluded = np.append(excluded, True)
    return (kind == NodeKind.OPERATOR) & ~excluded[name_code]
