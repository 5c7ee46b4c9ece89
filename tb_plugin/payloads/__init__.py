"""Typed descriptions of every JSON body the plugin serves: one `TypedDict` per view payload
(and the catalogue, loading and error replies), describing exactly what the builders in
`tb_plugin.analysis` and the server's store return today.

Each view spec (`tb_plugin.views.registry`) names its payload type; from those come the view
schemas of `openapi.yaml` (`msgspec.json.schema_components`, field descriptions from `doc`)
and so the frontend's types; `tests/test_payload_types.py` decodes real bodies strictly against
them. This package is a leaf: it imports only typing, typing_extensions and msgspec, so any layer
may import it.
"""

from .catalogue import (
    Error,
    Loading,
    NameList,
    RunListing,
    SpanStatusDetail,
    ViewList,
    ViewSpecs,
)
from .diff import DiffDefault, DiffKernelsPayload, DiffPayload
from .distributed import DistributedPayload
from .efficiency import CompiledPayload, RooflinePayload
from .gpu_idle import GpuIdlePayload
from .kernels import KernelPiesPayload, KernelsPayload
from .memory import MemoryPayload
from .memory_snapshot import MemorySnapshotPayload
from .memory_timeline import MemoryTimelinePayload
from .modules import ModulesPayload
from .operators import CallStacksPayload, OperatorPiesPayload, OperatorsPayload
from .overview import OverviewPayload
from .ranks import RanksTimelinePayload
from .timeline import (
    TimelineEventPayload,
    TimelinePayload,
    TimelineRangePayload,
    TimelineSearchPayload,
)
from .whatif import WhatIfPayload

#: The routes that are not views -> the type of their 200 JSON body. The view routes' types are
#: on their specs (`tb_plugin.views.registry.SPECS[...].payload`), the one registry of views.
CATALOGUE: dict[str, type] = {
    "/runs": RunListing,
    "/views": ViewList,
    "/viewspecs": ViewSpecs,
    "/workers": NameList,
    "/spans": NameList,
    "/status": SpanStatusDetail,
    "/diff/default": DiffDefault,
}

#: The replies that are not a route's payload: 202 while loading, and every error.
REPLIES: dict[str, type] = {"loading": Loading, "error": Error}

__all__ = ["CATALOGUE", "REPLIES", "Error", "Loading", "RunListing", "SpanStatusDetail",
           "ViewSpecs",
           "DiffDefault", "DiffKernelsPayload", "DiffPayload", "DistributedPayload",
           "GpuIdlePayload", "KernelPiesPayload", "KernelsPayload", "MemoryPayload",
           "MemorySnapshotPayload", "MemoryTimelinePayload", "ModulesPayload", "CallStacksPayload",
           "OperatorPiesPayload", "OperatorsPayload", "OverviewPayload",
           "TimelineEventPayload", "TimelinePayload", "TimelineRangePayload",
           "TimelineSearchPayload", "CompiledPayload", "RooflinePayload", "WhatIfPayload",
           "RanksTimelinePayload"]
