"""Op categories shared by the views (issue 25 item 5): GEMM, attention, normalization,
elementwise, reduction, communication, memcpy/memset, other. Vendor-neutral: CUDA and ROCm
names alike (cuBLAS/hipBLASLt/Tensile `Cijk_`, CK, Triton, NCCL/RCCL).

A device event's category:
1. memcpy/memset: a `gpu_memcpy` / `gpu_memset` event.
2. else the category of the operator that launched it (the op-tree owner of its launch; for a
   replayed graph kernel, the operator that captured it when a capture is merged), by the
   first rule of `RULES` whose operator pattern matches the operator's name;
3. else (no operator, or an operator that is "other") the first rule whose kernel pattern
   matches the kernel's name; else "other".
Patterns are case-insensitive regular expressions, searched (not anchored unless they say so),
tested once per distinct name. The order matters: attention before GEMM (a flash-attention
kernel has "gemm" in its tile names), normalization before reduction.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import Kind, TraceTable
from .device_work import device_work
from .node_kinds import NodeKind
from .optree import build_op_tree

GEMM, ATTENTION, NORMALIZATION = "GEMM", "attention", "normalization"
ELEMENTWISE, REDUCTION, COMMUNICATION = "elementwise", "reduction", "communication"
MEMORY, OTHER = "memcpy/memset", "other"
CATEGORIES = (GEMM, ATTENTION, NORMALIZATION, ELEMENTWISE, REDUCTION, COMMUNICATION, MEMORY,
              OTHER)

#: (category, operator pattern, kernel pattern), first match wins.
RULES: tuple[tuple[str, str, str], ...] = (
    (COMMUNICATION,
     r"^(?:c10d|nccl|gloo|rccl)[:_]|record_param_comms|all_?reduce|all_?gather|reduce_?scatter"
     r"|all_?to_?all",
     r"^(?:nccl|rccl)|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"),
    (ATTENTION,
     r"attention|attn|flash|sdpa|fmha|paged|store_cache|reshape_and_cache|kv_cache",
     r"attention|attn|flash|fmha|paged|reshape_and_cache|kv_cache"),
    (NORMALIZATION, r"norm", r"norm"),
    (GEMM,
     r"^aten::(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|_scaled_mm|mv|addmv|dot|vdot"
     r"|convolution|_convolution|conv\w*|cudnn_convolution\w*|miopen_convolution\w*)$"
     r"|gemm|matmul|_mm$|scaled_mm",
     r"gemm|^cijk_|cutlass|cublas|hipblas|rocblas|wvsplitk|^triton_tem_|(?<!finalize_)matmul"
     r"|conv"),
    (REDUCTION,
     r"^aten::(?:sum|mean|max|min|amax|amin|argmax|argmin|cumsum|cumprod|prod|softmax"
     r"|_softmax|log_softmax|_log_softmax|topk|sort|var|std|var_mean|std_mean|logsumexp|all"
     r"|any|norm_except_dim)$|softmax|topk|argmax|sampl",
     r"reduce|reduction|softmax|argmax|topk|cumsum|scan|^triton_(?:red|per)_"
     r"|finalize_matmul"),  # a MoE matmul's top-k combine (triton_kernels matmul_ogs)
    (ELEMENTWISE,
     r"^aten::(?:add|sub|mul|div|rsub|neg|pow|exp|log|sqrt|rsqrt|abs|relu|gelu|silu|sigmoid"
     r"|tanh|clamp|where|masked_fill|fill|zero|copy|clone|to|_to_copy|contiguous|cat|index"
     r"|index_put|gather|scatter|embedding|dropout|_foreach\w*)_?$|_and_mul|rotary|rope"
     r"|_foreach_",
     r"elementwise|vectorized|unrolled|pointwise|^triton_poi_|multi_tensor_apply|_and_mul"
     r"|rotary|rope|fill|copy|cat_|index|gather|scatter"),
)


def _compiled(which: int) -> list[tuple[str, re.Pattern]]:
    return [(rule[0], re.compile(rule[which], re.IGNORECASE)) for rule in RULES]


_OP_RULES = _compiled(1)
_KERNEL_RULES = _compiled(2)


def categorize(name: str, operator: bool) -> str:
    """The category of one operator name (`operator=True`) or kernel name; "other" when no
    rule matches."""
    for category, pattern in (_OP_RULES if operator else _KERNEL_RULES):
        if pattern.search(name):
            return category
    return OTHER


def _per_name(names: np.ndarray, operator: bool) -> np.ndarray:
    uniques, inverse = np.unique(names.astype(str), return_inverse=True)
    mapped = np.asarray([categorize(n, operator) if n else OTHER for n in uniques],
                        dtype=object)
    return mapped[inverse] if len(names) else np.empty(0, dtype=object)


def device_categories(table: TraceTable, operators: Optional[pd.Series] = None
                      ) -> pd.DataFrame:
    """One row per device event: `event`, `kernel` (name), `operator` (the launching operator,
    "" without one), `dur_us`, `category` (module docstring). `operators` (event row →
    operator name) overrides the op tree, e.g. `graphs.merge_capture`'s captured_by."""
    work = device_work(table)
    events = table.events
    rows = work["event"].to_numpy()
    names = np.asarray(events["name"].cat.categories.astype(str), dtype=object)
    kernel = names[events["name"].cat.codes.to_numpy()[rows]]
    tree = build_op_tree(table)
    owner = pd.Series(tree.device_owner, index=tree.device_rows).reindex(rows).fillna(
        -1).to_numpy().astype(np.int64)
    usable = owner >= 0
    usable[usable] = ~np.isin(tree.kind[owner[usable]], (NodeKind.ROOT,
                                                         NodeKind.PROFILER_STEP))
    names_of = tree.names if len(tree) else np.array([""], dtype=object)  # no tree: no op
    operator = np.where(usable, names_of[np.maximum(owner, 0)], "").astype(object)
    if operators is not None:
        given = operators.reindex(rows).fillna("").to_numpy(dtype=object)
        operator = np.where(given != "", given, operator)
    category = _per_name(operator, operator=True)
    fallback = (operator == "") | (category == OTHER)
    category[fallback] = _per_name(kernel[fallback], operator=False)
    kind = work["kind"].to_numpy()
    category[np.isin(kind, (Kind.MEMCPY, Kind.MEMSET))] = MEMORY
    return pd.DataFrame({"event": rows, "kernel": kernel, "operator": operator,
                         "dur_us": work["dur"].to_numpy(), "category": category})


def category_rollup(table: TraceTable, operators: Optional[pd.Series] = None
                    ) -> list[dict[str, Any]]:
    """Per category (all of `CATEGORIES`, in that order): device events, their time (us) and
    share of the total device time (%)."""
    frame = device_categories(table, operators)
    total = float(frame["dur_us"].sum())
    grouped = frame.groupby("category")["dur_us"].agg(["size", "sum"])
    return [{"category": c,
             "events": int(grouped["size"].get(c, 0)),
             "time_us": float(grouped["sum"].get(c, 0.0)),
             "pct": 100.0 * float(grouped["sum"].get(c, 0.0)) / total if total > 0 else 0.0}
            for c in CATEGORIES]


def operator_categories(table: TraceTable, names: Any) -> np.ndarray:
    """Per operator name: its rule's category; for "other", the category holding most of the
    device time of the events the operator launched itself (`device_categories`, `dominant`),
    else "other"."""
    names = np.asarray(names, dtype=object)
    category = _per_name(names, operator=True)
    unresolved = category == OTHER
    if unresolved.any() and len(device_work(table)):
        frame = device_categories(table)
        lookup = dominant(frame[frame["operator"] != ""], "operator")
        category[unresolved] = [lookup.get(n, OTHER) for n in names[unresolved]]
    return category


def dominant(frame: pd.DataFrame, key: str) -> dict[str, str]:
    """Per value of `frame[key]`: the category holding most of its `dur_us` (ties: the
    earlier in `CATEGORIES`)."""
    time = frame.groupby([key, "category"])["dur_us"].sum().reset_index()
    time["rank"] = time["category"].map({c: i for i, c in enumerate(CATEGORIES)})
    time = time.sort_values([key, "dur_us", "rank"], ascending=[True, False, True],
                            kind="stable")
    first = time.drop_duplicates(key)
    return dict(zip(first[key], first["category"]))
