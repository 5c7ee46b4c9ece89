"""The option Structs of the Kernel view (read by `views/options.py` for the query string and the
CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ..option_types import TopN


class KernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Annotated[Literal["kernel", "kernel_op_launch"], Meta(description=(
        "kernel: by kernel name; kernel_op_launch: by kernel name, launching operator (a "
        "replayed CUDA/HIP graph's: the host annotation around its launch) and launch "
        "configuration (grid, block, registers, shared memory)."))] = "kernel"

class KernelPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    top_n: TopN = None
