"""Views over several traces that need more than one analysis module's builder.

`build_distributed_view(tables, skipped)` is the Distributed payload of one span: the analysis
of the usable workers plus why the others were left out. Every view's builder is declared in
`tb_plugin.views.registry`, the one place the CLI and the server build payloads from.
"""

from __future__ import annotations

from typing import Optional

from ..ingest.schema import TraceTable
from ..payloads import DistributedPayload
from .distributed import build_distributed


def build_distributed_view(tables: dict[str, TraceTable],
                           skipped: Optional[dict[str, str]] = None) -> DistributedPayload:
    """The distributed view of one span over the usable workers in `tables`; `skipped` maps
    the workers left out (broken, or without that span) to why, reported in `messages` and
    `skipped`."""
    payload = build_distributed(tables)
    skipped = dict(sorted((skipped or {}).items()))
    payload["messages"] = [f"{w}: left out: {why}" for w, why in skipped.items()] + list(
        payload.get("messages") or [])
    payload["skipped"] = skipped
    return payload
