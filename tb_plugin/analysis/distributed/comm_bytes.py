"""Message sizes of communication events (spec 3.12): bytes a collective or point-to-point op
moves, from its inputs' shapes and element types (`record_shapes`), else from
record_param_comms' element count and dtype. A comm op with `Input Dims` but no `Input type`
counts 0 bytes instead of dropping the run (bug 12d).
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np
import pandas as pd

from ...ingest.schema import TraceTable
from ..dtypes import ELEMENT_BYTES

#: Element sizes of `Input type` strings and record_param_comms `dtype` names (one table).
TYPE_SIZES = ELEMENT_BYTES


def comm_bytes(table: TraceTable, rows: np.ndarray, messages: list[str]) -> np.ndarray:
    """Bytes per comm event: Σ numel × element size of its inputs (one parse per distinct
    (Input Dims, Input type) pair), else record_param_comms `In msg nelems` × dtype size.
    NaN when unknown or zero, so a call falls back to its other events."""
    args = table.op_args.drop_duplicates("event").set_index("event").reindex(rows)
    if len(args.columns) == 0:
        return np.full(len(rows), np.nan)
    dims = args["input_dims"].astype(object).fillna("").astype(str)
    types = args["input_types"].astype(object).fillna("").astype(str)
    pairs = pd.DataFrame({"dims": dims.to_numpy(), "types": types.to_numpy()})
    unique = pairs.drop_duplicates()
    unknown: set[str] = set()
    untyped = [0]
    sizes = [_input_bytes(d, t, unknown, untyped) for d, t in unique.itertuples(index=False)]
    lookup = pd.Series(sizes, index=pd.MultiIndex.from_frame(unique), dtype=np.float64)
    from_dims = lookup.reindex(pd.MultiIndex.from_frame(pairs)).to_numpy()
    element = args["dtype"].astype(object).map(TYPE_SIZES).to_numpy(dtype=np.float64)
    from_nelems = args["in_msg_nelems"].to_numpy(dtype=np.float64) * element
    result = np.where(from_dims > 0, from_dims, from_nelems)
    if unknown:
        messages.append("Unknown element type(s) counted as 0 bytes: "
                        + ", ".join(sorted(unknown)) + ".")
    if untyped[0]:
        messages.append(f"{untyped[0]} distinct communication input shape(s) have no input "
                        "types; their size counts as 0 bytes.")
    return np.where(result > 0, result, np.nan)


def _input_bytes(dims_text: str, types_text: str, unknown: set[str], untyped: list[int]) -> float:
    """Σ over tensor inputs of numel × element size; TensorList and scalar inputs count 0."""
    dims, types = _literal(dims_text), _literal(types_text)
    if not isinstance(dims, list):
        return math.nan
    if not isinstance(types, list):
        types = []
        untyped[0] += int(any(_is_shape(d) and d for d in dims))
    total = 0.0
    for i, shape in enumerate(dims):
        kind = types[i] if i < len(types) else ""
        if not _is_shape(shape) or not kind or kind in ("Scalar", "ScalarList", "TensorList"):
            continue
        size = TYPE_SIZES.get(str(kind))
        if size is None:
            unknown.add(str(kind))
            continue
        total += float(math.prod(int(x) for x in shape)) * size
    return total


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, int) for x in value)


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
