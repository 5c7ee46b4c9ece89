"""`/diff` (`analysis.diff.build_diff`): one node of the diff of two traces' call trees
(baseline "left"/"base", experiment "right"/"exp"), with its children and operator deltas."""

from typing import Annotated, Literal

from typing_extensions import TypedDict

from .common import doc

NodeType = Literal["root", "operator", "profiler_step", "dataloader", "optimizer", "module",
                   "user_annotation", "python", "pl_module", "backward", "composite", "blank"]


class DiffSide(TypedDict):
    """One side of a diff node."""

    name: Annotated[str, doc('Node name ("CallTreeRoot", "CompositeNodes", "Blank" for the '
                             "special kinds).")]
    type: Annotated[NodeType, doc("root; composite: several nodes; blank: none on this side; "
                                  "else the node's kind.")]
    count: Annotated[int, doc("Nodes on this side.")]
    host_duration_us: Annotated[float, doc("Host time, us (per step at the root when "
                                           "per_step).")]
    device_duration_us: Annotated[float, doc("Device time, us.")]
    total_duration_us: Annotated[float, doc("Device time per node where it has any, else host "
                                            "time, summed, us.")]


class DiffDelta(TypedDict):
    """right - left, us."""

    host_duration_us: float
    device_duration_us: float
    total_duration_us: float


class DiffChild(TypedDict):
    path: Annotated[str, doc('The child\'s path, e.g. "0-1" (for `/diff?path=`).')]
    left: DiffSide
    right: DiffSide
    delta: DiffDelta
    expandable: Annotated[bool, doc("The child has children of its own.")]


_PER = "{} (per-step means at a per_step root, else counts/us)."


class OperatorDelta(TypedDict):
    """Baseline, experiment and delta of one operator name under the node."""

    name: Annotated[str, doc("Operator name.")]
    base_calls: Annotated[float, doc(_PER.format("Baseline calls"))]
    exp_calls: Annotated[float, doc(_PER.format("Experiment calls"))]
    delta_calls: Annotated[float, doc(_PER.format("exp - base calls"))]
    base_host_total_us: float
    exp_host_total_us: float
    delta_host_total_us: float
    base_host_self_us: float
    exp_host_self_us: float
    delta_host_self_us: float
    base_device_total_us: float
    exp_device_total_us: float
    delta_device_total_us: float
    base_device_self_us: float
    exp_device_self_us: float
    delta_device_self_us: float


class DiffTrace(TypedDict):
    tid: Annotated[str, doc("The thread whose tree is compared.")]
    steps: Annotated[int, doc("Profiler steps of the trace.")]


class DiffPayload(TypedDict):
    """`/diff`: one node of the diff of two traces."""

    path: Annotated[str, doc('This node\'s path: "0" (root), "0-1", ...')]
    left: Annotated[DiffSide, doc("Baseline side.")]
    right: Annotated[DiffSide, doc("Experiment side.")]
    delta: Annotated[DiffDelta, doc("right - left.")]
    children: Annotated[list[DiffChild], doc("Direct children.")]
    operator_deltas: Annotated[list[OperatorDelta], doc(
        "Per operator name, sorted by |delta| of operator_sort, ties by name.")]
    operator_sort: Annotated[Literal["delta_device_total_us", "delta_host_total_us"], doc(
        "Device total when either side ran device work, else host total.")]
    per_step: Annotated[bool, doc("This node's numbers are per-step means (the root only).")]
    base: Annotated[DiffTrace, doc("The baseline trace.")]
    exp: Annotated[DiffTrace, doc("The experiment trace.")]
