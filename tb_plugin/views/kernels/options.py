"""The option Structs of the Kernel view (read by `views/options.py` for the query string and the
CLI's flags alike)."""

from __future__ import annotations

from typing import Literal

import msgspec

from ..option_types import TopN


class KernelOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: Literal["kernel", "kernel_op_launch"] = "kernel"

class KernelPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    top_n: TopN = None
