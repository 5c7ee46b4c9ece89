"""Views over several traces that need more than one analysis module's builder.

`build_distributed_view(tables, skipped)` is the Distributed payload of one span: the analysis
of the usable workers plus why the others were left out. Every view's builder is declared in
`tb_plugin.views.registry`, the one place the CLI and the server build payloads from.
"""

from __future__ import annotations

from typing import Any, Optional

from ...views.distributed.payload import DistributedPayload
from .run import SummaryInput, build_distributed


def build_distributed_view(inputs: dict[str, SummaryInput],
                           skipped: Optional[dict[str, str]] = None) -> DistributedPayload:
    """The distributed view of one span over the usable workers in `inputs` (each a table or
    its rank summary); `skipped` maps the workers left out (broken, or without that span) to
    why, reported in `messages` and `skipped`."""
    payload: Any = build_distributed(inputs)
    skipped = dict(sorted((skipped or {}).items()))
    payload["messages"] = [f"{w}: left out: {why}" for w, why in skipped.items()] + list(
        payload.get("messages") or [])
    payload["skipped"] = skipped
    return payload
