"""The option Structs of the Operator view (read by `views/options.py` for the query string and
the CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import msgspec
from msgspec import Meta

from ..option_types import TopN

OperatorGroup = Literal["operator", "operator_input_shape"]

class OperatorOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"

class OperatorPieOptions(msgspec.Struct, forbid_unknown_fields=True):
    group_by: OperatorGroup = "operator"
    top_n: TopN = None

class OperatorStackOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    group_by: OperatorGroup = "operator"
    name: Annotated[str, Meta(description="The operator name, as in the operator table.")]
    input_shape: Optional[Annotated[str, Meta(description=(
        "Only with `group_by=operator_input_shape`; the row's input shape."))]] = None
