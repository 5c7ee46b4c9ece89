"""`/modules` (`analysis.modules.build_modules`): the nn.Module (or Lightning module) tree of
one trace. Times are totals over all calls of a row (us, 3 decimals)."""

from typing import Annotated, Literal

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import doc


class ModuleRow(TypedDict):
    """One module (by name and id) under its parent, with its children."""

    key: Annotated[str, doc('Path of the row in the tree, e.g. "0-1".')]
    name: Annotated[str, doc('Module name without "nn.Module: ", e.g. "Conv2d_0".')]
    module_id: Annotated[int, doc("The module's id in the trace.")]
    module_type: NotRequired[Annotated[str, doc("Lightning only: the module's type.")]]
    occurrences: Annotated[int, doc("Calls.")]
    operators: Annotated[int, doc("Operators called inside.")]
    host_total_us: Annotated[float, doc("Host time, us.")]
    host_self_us: Annotated[float, doc("Host time outside child modules, us.")]
    device_total_us: Annotated[float, doc("Device time, us.")]
    device_self_us: Annotated[float, doc("Device time outside child modules, us.")]
    avg_duration_us: Annotated[float, doc("Mean device total per call if any, else mean host "
                                          "total, us.")]
    backward_host_us: NotRequired[Annotated[float, doc(
        "Host time of the backward ops attributed to it, us; only when has_backward.")]]
    backward_device_us: NotRequired[Annotated[float, doc(
        "Device time of the backward ops attributed to it, us; only when has_backward.")]]
    missing_calls: NotRequired[Annotated[int, doc(
        "Calls with no node in the operator tree (counted in occurrences, not in times); "
        "absent when 0.")]]
    children: Annotated[list["ModuleRow"], doc("Child modules.")]


class FlameNode(TypedDict):
    """One flame-graph node (a module row)."""

    name: Annotated[str, doc("Module name.")]
    module_id: Annotated[int, doc("The module's id.")]
    value: Annotated[float, doc("Device total us when the trace has device time, else host "
                                "total us.")]
    children: Annotated[list["FlameNode"], doc("Child modules.")]


class BackwardStats(TypedDict):
    """How backward ops were attributed to modules (fwdbwd flows)."""

    pairs: Annotated[int, doc("Forward/backward flow pairs.")]
    matched: Annotated[int, doc("Pairs matched to a module.")]
    attributed_ops: Annotated[int, doc("Backward ops attributed to a module.")]
    unattributed_ops: Annotated[int, doc("Backward ops not attributed.")]


class ModulesPayload(TypedDict):
    """`/modules`: the module view (the server answers 404 when `available` is false)."""

    available: Annotated[bool, doc("The trace has module events.")]
    message: NotRequired[Annotated[str, doc("Why it is unavailable, or that statistics are "
                                            "incomplete; absent otherwise.")]]
    source: NotRequired[Annotated[Literal["python_function", "lightning"], doc(
        "Where modules come from; absent when unavailable.")]]
    has_device: NotRequired[Annotated[bool, doc("Some module ran device work.")]]
    has_backward: NotRequired[Annotated[bool, doc("Backward ops were attributed to modules.")]]
    rows: Annotated[list[ModuleRow], doc("Root modules, each with its children.")]
    flamegraph: Annotated[list[FlameNode], doc("Flame graph, one root per root module.")]
    backward: NotRequired[Annotated[BackwardStats, doc("Backward attribution statistics.")]]
    warnings: NotRequired[Annotated[list[str], doc("Caveats.")]]
