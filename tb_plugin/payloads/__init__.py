"""Typed descriptions of every JSON body the plugin serves: one `TypedDict` per view payload
(and the catalogue, loading and error replies), describing exactly what the builders in
`tb_plugin.analysis` and the server's store return today.

`PAYLOADS` maps each route to the type of its 200 JSON body. From it come the view schemas of
`openapi.yaml` (`msgspec.json.schema_components`, field descriptions from `doc`) and so the
frontend's types; `tests/analysis/test_payload_types.py` decodes real bodies strictly against
it. This package is a leaf: it imports only typing, typing_extensions and msgspec, so any layer
may import it.
"""

from .catalogue import Error, Loading, NameList, RunListing, SpanStatusDetail, ViewList
from .diff import DiffPayload
from .distributed import DistributedPayload
from .kernels import KernelPiesPayload, KernelsPayload
from .memory import MemoryPayload
from .memory_timeline import MemoryTimelinePayload
from .modules import ModulesPayload
from .operators import CallStacksPayload, OperatorPiesPayload, OperatorsPayload
from .overview import OverviewPayload
from .timeline import TimelineEventPayload, TimelinePayload, TimelineSearchPayload

#: Route path -> the type of its 200 JSON body.
PAYLOADS: dict[str, type] = {
    "/runs": RunListing,
    "/views": ViewList,
    "/workers": NameList,
    "/spans": NameList,
    "/status": SpanStatusDetail,
    "/overview": OverviewPayload,
    "/operators": OperatorsPayload,
    "/operators/pies": OperatorPiesPayload,
    "/operators/stack": CallStacksPayload,
    "/kernels": KernelsPayload,
    "/kernels/pies": KernelPiesPayload,
    "/timeline": TimelinePayload,
    "/timeline/event": TimelineEventPayload,
    "/timeline/search": TimelineSearchPayload,
    "/memory": MemoryPayload,
    "/memory/timeline": MemoryTimelinePayload,
    "/modules": ModulesPayload,
    "/distributed": DistributedPayload,
    "/diff": DiffPayload,
}

#: The replies that are not a route's payload: 202 while loading, and every error.
REPLIES: dict[str, type] = {"loading": Loading, "error": Error}

__all__ = ["PAYLOADS", "REPLIES", "Error", "Loading", "RunListing", "SpanStatusDetail",
           "DiffPayload", "DistributedPayload", "KernelPiesPayload", "KernelsPayload",
           "MemoryPayload", "MemoryTimelinePayload", "ModulesPayload", "CallStacksPayload",
           "OperatorPiesPayload", "OperatorsPayload", "OverviewPayload",
           "TimelineEventPayload", "TimelinePayload", "TimelineSearchPayload"]
