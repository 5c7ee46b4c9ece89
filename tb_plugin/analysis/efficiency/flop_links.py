"""FLOPs that one call's arguments leave open and another event of the trace tells.

PyTorch 1.x traces (and 2.x traces without `Concrete Inputs`) record shapes but no scalars:

- a convolution's stride/padding/dilation are missing, so its output size is not computable;
  but its backward node (`CudnnConvolutionBackward`, `ConvolutionBackward0`, ... with the same
  `Sequence number` as the forward op) records the gradient of that output, whose shape is the
  output's. FLOPs = output elements x FLOPs per output element (2 * Cin/groups * kernel taps).
- a conv backward (`cudnn_convolution_backward`) does not say which gradients it computed
  (output_mask); it calls one `*_backward_input` / `*_backward_weight` op per gradient: those
  calls under it are counted.

A link that is absent or ambiguous (two backward nodes of one sequence number with different
shapes, a shape whose batch or channels differ from the forward's) leaves the call unknown with
its reason.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

import numpy as np

from ...ingest.schema import TraceTable
from ..optree import build_op_tree

MASK_NOT_RECORDED = "output_mask not recorded, and no *_backward_input/_weight call under it"
_GRADIENT_CALLS = (("_backward_input",), ("_backward_weight", "_backward_weights"))
_CONV_BACKWARD_NODE = re.compile(r"Conv\w*Backward\d*$")


def resolve_pending(table: TraceTable, pending: np.ndarray, flops: np.ndarray,
                    bytes_: np.ndarray, reason: np.ndarray) -> None:
    """Fill, in place, the op_args rows whose estimate left a ("mask", ...) or ("output", ...)
    to another event."""
    kinds = np.array([p[0] if isinstance(p, tuple) else "" for p in pending], dtype=object)
    if (kinds == "mask").any():
        _masks_from_children(table, np.flatnonzero(kinds == "mask"), pending, flops, reason)
    if (kinds == "output").any():
        _outputs_from_backward(table, np.flatnonzero(kinds == "output"), pending, flops,
                               bytes_, reason)


def _masks_from_children(table: TraceTable, rows: np.ndarray, pending: np.ndarray,
                         flops: np.ndarray, reason: np.ndarray) -> None:
    tree = build_op_tree(table)
    node_of_event = np.full(len(table.events), -1, dtype=np.int64)
    real = tree.event >= 0
    node_of_event[tree.event[real]] = np.flatnonzero(real)
    events = table.op_args["event"].to_numpy()
    names = tree.names
    for row in rows:
        node = node_of_event[events[row]]
        if node < 0:
            continue
        below = [str(n) for n in names[tree.children(node)]]
        count = sum(any(n.endswith(ends) for n in below) for ends in _GRADIENT_CALLS)
        if count:
            flops[row], reason[row] = pending[row][1] * count, None


def _outputs_from_backward(table: TraceTable, rows: np.ndarray, pending: np.ndarray,
                           flops: np.ndarray, bytes_: np.ndarray, reason: np.ndarray) -> None:
    shapes = _backward_output_shapes(table)
    sequence = table.op_args["sequence_number"].to_numpy(dtype=np.float64)
    for row in rows:
        _, per_output, rank, batch, channels, moved, size = pending[row]
        shape = shapes.get(sequence[row]) if np.isfinite(sequence[row]) else None
        if shape is None or len(shape) != rank or shape[0] != batch or shape[1] != channels \
                or min(shape) < 1:
            continue
        out = math.prod(shape)
        flops[row], bytes_[row], reason[row] = per_output * out, moved + out * size, None


def _backward_output_shapes(table: TraceTable) -> dict[float, tuple[int, ...]]:
    """Sequence number -> the grad_output shape its conv backward node recorded (only the
    sequence numbers whose nodes agree on one shape)."""
    args = table.op_args
    events = args["event"].to_numpy()
    names = table.events["name"].array[events]
    categories = names.categories
    wanted = np.array([bool(_CONV_BACKWARD_NODE.search(str(c))) for c in categories])
    codes = names.codes
    rows = np.flatnonzero((codes >= 0) & wanted[np.maximum(codes, 0)])
    sequence = args["sequence_number"].to_numpy(dtype=np.float64)
    dims = args["input_dims"]
    seen: dict[float, set[tuple[int, ...]]] = {}
    for row in rows:
        shape = _first_shape(dims.iloc[row])
        if np.isfinite(sequence[row]) and shape is not None:
            seen.setdefault(sequence[row], set()).add(shape)
    return {s: next(iter(found)) for s, found in seen.items() if len(found) == 1}


def _first_shape(text: Any) -> Optional[tuple[int, ...]]:
    if not isinstance(text, str) or not text.startswith("[["):
        return None
    head = text[2:text.find("]")]
    try:
        shape = tuple(int(v) for v in head.split(",")) if head.strip() else ()
    except ValueError:
        return None
    return shape or None
