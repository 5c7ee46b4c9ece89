"""The Findings view's spec and builder (no tab: JSON for scripts and agents)."""

from __future__ import annotations

from typing import Any

from ...analysis.findings import build_findings
from ..spec import ViewSpec
from .options import FindingsOptions
from .payload import FindingsPayload


def findings(table: Any, options: FindingsOptions) -> Any:
    return build_findings(table, top=options.top)


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("findings", "/findings", "Overview", findings, options=FindingsOptions,
             payload=FindingsPayload,
             summary="What matters in a worker span, as compact versioned JSON: profile "
                     "health, step time and breakdown, top recommendations with predicted "
                     "savings and evidence, and pointers (view + options) to the detail.",
             description="Shape: see `tb_plugin.analysis.findings`. At most about 8 KB; "
                         "`schema_version` changes when a field changes meaning."),
)
