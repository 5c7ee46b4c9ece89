"""`/diff` (`analysis.diff.tree.build_diff`): one node of the diff of two traces' call trees
(baseline "left"/"base", experiment "right"/"exp"), with its children and operator deltas."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import doc

NodeType = Literal["root", "operator", "profiler_step", "dataloader", "optimizer", "module",
                   "user_annotation", "python", "pl_module", "backward", "thread", "composite",
                   "blank"]


class DiffSide(TypedDict):
    """One side of a diff node."""

    name: Annotated[str, doc('Node name ("CallTreeRoot", "CompositeNodes", "Blank" for the '
                             "special kinds).")]
    type: Annotated[NodeType, doc("root; composite: several nodes; blank: none on this side; "
                                  "thread: a thread other than the main one (its name says "
                                  "which, e.g. \"autograd thread\"); else the node's kind.")]
    count: Annotated[int, doc("Nodes on this side.")]
    host_duration_us: Annotated[float, doc("Host (CPU) time, us, on the payload's basis.")]
    device_duration_us: Annotated[float, doc("Device (GPU) time, us, on the payload's basis.")]
    total_duration_us: Annotated[float, doc("Device time per node where it has any, else host "
                                            "time, summed, us, on the payload's basis.")]


class DiffDelta(TypedDict):
    """right - left, us."""

    host_duration_us: float
    device_duration_us: float
    total_duration_us: float


Verdict = Literal["regressed", "improved", "unchanged"]


class DiffInterval(TypedDict):
    """The change of a row's per-step time (whatever the basis), with its bootstrap interval
    over the steps of both traces (`analysis.diff.verdict`)."""

    delta_us: Annotated[float, doc("exp - base mean per-step time, us.")]
    low_us: Annotated[float, doc("Lower bound of the interval of delta_us, us.")]
    high_us: Annotated[float, doc("Upper bound of the interval of delta_us, us.")]
    verdict: Annotated[Verdict, doc("regressed: the interval lies above floor_us; improved: "
                                    "below -floor_us; else unchanged (within noise).")]


class DiffVerdict(DiffInterval):
    """The node's own interval and verdict, with what they rest on."""

    confidence: Annotated[float, doc("Two-sided confidence of the intervals (0.95).")]
    over: Annotated[Literal["steps"], doc("What is resampled: the steps of each trace.")]
    note: Annotated[str, doc("What the interval leaves out, in words.")]
    min_change: Annotated[float, doc("Smallest change that counts, a share of the baseline "
                                     "step time.")]
    floor_us: Annotated[float, doc("min_change x the baseline's mean step time, us.")]
    relative: Annotated[Optional[float], doc("delta_us / the baseline node's per-step time "
                                             "(null when that is 0).")]


class DiffChild(TypedDict):
    path: Annotated[str, doc('The child\'s path, e.g. "0-1" (for `/diff?path=`).')]
    left: DiffSide
    right: DiffSide
    delta: DiffDelta
    expandable: Annotated[bool, doc("The child has children of its own.")]
    interval: Annotated[Optional[DiffInterval], doc(
        "Per-step change with its interval and verdict; null without steps on both sides.")]


_PER = "{} (per-step means on the per_step basis, else counts)."


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
    per_step: Annotated[bool, doc("basis == \"per_step\".")]
    basis: Annotated[Literal["per_step", "total"], doc(
        "What every number of the payload is (node, children, operator deltas): per_step, "
        "each side divided by its own step count; total, over the whole span. per_step falls "
        "back to total when a side has no ProfilerStep. The root is the sum of its children.")]
    base: Annotated[DiffTrace, doc("The baseline trace.")]
    exp: Annotated[DiffTrace, doc("The experiment trace.")]
    verdict: Annotated[Optional[DiffVerdict], doc(
        "This node's per-step change with its interval and verdict (the header); null "
        "without steps on both sides.")]


class KernelDelta(TypedDict):
    """Baseline, experiment and delta of one kernel name (or operator -> kernel)."""

    name: Annotated[str, doc("Kernel name.")]
    operator: NotRequired[Annotated[str, doc(
        "The launching operator (`N/A`: launched outside any operator); "
        "group_by=operator_kernel only.")]]
    base_calls: Annotated[float, doc(_PER.format("Baseline launches"))]
    exp_calls: Annotated[float, doc(_PER.format("Experiment launches"))]
    delta_calls: Annotated[float, doc(_PER.format("exp - base launches"))]
    base_total_us: Annotated[float, doc("Baseline kernel time, us, on the basis.")]
    exp_total_us: Annotated[float, doc("Experiment kernel time, us, on the basis.")]
    delta_total_us: Annotated[float, doc("exp - base kernel time, us.")]
    base_mean_us: Annotated[float, doc("Baseline mean duration of one launch, us (0: none).")]
    exp_mean_us: Annotated[float, doc("Experiment mean duration of one launch, us (0: none).")]


class DiffKernelsPayload(TypedDict):
    """`/diff/kernels`: every GPU kernel of both traces (all threads), compared."""

    group_by: Annotated[Literal["kernel", "operator_kernel"], doc(
        "kernel: by kernel name; operator_kernel: by launching operator and kernel name.")]
    basis: Annotated[Literal["per_step", "total"], doc("As in `/diff`.")]
    base_steps: Annotated[int, doc("Profiler steps of the baseline.")]
    exp_steps: Annotated[int, doc("Profiler steps of the experiment.")]
    base_total_us: Annotated[float, doc("All baseline kernel time, us, on the basis.")]
    exp_total_us: Annotated[float, doc("All experiment kernel time, us, on the basis.")]
    delta_total_us: Annotated[float, doc("exp - base, us.")]
    rows: Annotated[list[KernelDelta], doc(
        "Sorted by |delta_total_us| descending, ties by operator then name.")]
