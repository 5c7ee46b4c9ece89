"""The option Structs of the Diff view (read by `views/options.py` for the query string and the
CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

DiffBasis = Annotated[Literal["per_step", "total"], Meta(description=(
    "per_step: each side divided by its own ProfilerStep count (totals when a side has none); "
    "total: over the whole span. One basis for every number of the payload."))]

class DiffOptions(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, Meta(description=(
        "A node path from the payload (`0` the root, `0-1` its second child, ...)."))] = "0"
    basis: DiffBasis = "per_step"

class DiffKernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Annotated[Literal["kernel", "operator_kernel"], Meta(description=(
        "kernel: by kernel name; operator_kernel: by launching operator (`N/A` outside any, "
        "replayed CUDA/HIP graphs included) and kernel name, not by launch configuration "
        "(the Kernel view's kernel_op_launch is)."))] = "kernel"
    basis: DiffBasis = "per_step"
