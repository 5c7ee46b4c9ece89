"""The Findings view's options (read by `views/options.py` for the query string and the CLI's
flags alike)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

#: The Overview's rules are 13 (`analysis.advice.recommendations.RULE_IDS`); each fires once.
MAX_TOP = 13


class FindingsOptions(msgspec.Struct, forbid_unknown_fields=True):
    top: Annotated[int, Meta(ge=1, le=MAX_TOP, description=(
        f"Number of recommendations kept, the Overview's first (1 to {MAX_TOP})."))] = 5
