"""The Diff view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.diff.kernels import build_diff_kernels
from ...analysis.diff.tree import UnknownDiffPathError, build_diff
from ...output import rows
from ...output.rows import Rows
from ..errors import NotInTrace
from ..spec import PAIR, ViewSpec
from .options import DiffKernelOptions, DiffOptions
from .payload import DiffKernelsPayload, DiffPayload


def diff(base: Any, exp: Any, options: DiffOptions) -> Any:
    try:
        return build_diff(base, exp, options.path, options.basis)
    except UnknownDiffPathError as exc:
        raise NotInTrace(str(exc.args[0] if exc.args else "no such diff node")[:300]) from exc

def diff_kernels(base: Any, exp: Any, options: DiffKernelOptions) -> Any:
    return build_diff_kernels(base, exp, options.group_by, options.basis)


def diff_rows(payload: dict[str, Any]) -> Rows:
    return payload["operator_deltas"]


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("diff", "/diff", "Diff", diff,
             payload=DiffPayload, kind=PAIR, options=DiffOptions,
             rows=diff_rows,
             summary="One node of the diff of two worker spans (base vs experiment), with "
                     "children.",
             description="Both sides are looked up among the discovered names; 202 while "
             "either is loading.\n`path` is a node path from the payload (`0` the root, `0-1` "
             "its second child, ...).\nShape: see `tb_plugin.analysis.diff.tree.build_diff`. With "
             "`format=csv`, the operator deltas.",
             errors={"404": "Unknown run/worker/span on either side, or no node at `path`."}),
    ViewSpec("diff_kernels", "/diff/kernels", "Diff", diff_kernels,
             payload=DiffKernelsPayload, kind=PAIR, options=DiffKernelOptions,
             rows=rows.payload_rows,
             summary="GPU kernels of two worker spans compared, by kernel name or by "
                     "operator -> kernel, sorted by |delta|.",
             description="Every kernel of both traces (all threads). Shape: see\n"
             "`tb_plugin.analysis.diff.kernels.build_diff_kernels`. With `format=csv`, the "
             "rows.",
             errors={"404": "Unknown run/worker/span on either side."}),
)
