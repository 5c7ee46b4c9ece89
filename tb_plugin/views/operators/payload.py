"""`/operators`, `/operators/pies`, `/operators/stack` (`analysis.operators`)."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import PieSlice, doc

_SHAPE = "Only with group_by=operator_input_shape: the input shapes (Python str of the dims list)."


class OperatorRow(TypedDict):
    """One operator name (or name + input shape) with its summed times over all calls."""

    name: Annotated[str, doc('Operator name, e.g. "aten::mm".')]
    input_shape: NotRequired[Annotated[str, doc(_SHAPE)]]
    category: Annotated[str, doc(
        "Op category (GEMM, attention, normalization, elementwise, reduction, communication, "
        "memcpy/memset, other): by its name, else by the kernels it launched itself.")]
    calls: Annotated[int, doc("Number of calls.")]
    host_self_us: Annotated[float, doc("Host time outside child operators, us (3 decimals).")]
    host_total_us: Annotated[float, doc("Host time including child operators, us.")]
    device_self_us: Annotated[float, doc("Time of the kernels launched by the operator itself, "
                                         "us.")]
    device_total_us: Annotated[float, doc("Time of the kernels launched by it or its children, "
                                          "us.")]
    tc_eligible: Annotated[bool, doc("The operator could use Tensor Cores.")]
    tc_self_pct: Annotated[float, doc("Share of device self time on Tensor Cores, percent "
                                      "(2 decimals).")]
    tc_total_pct: Annotated[float, doc("Share of device total time on Tensor Cores, percent.")]
    has_call_stack: Annotated[bool, doc("Some call has a recorded Python call stack "
                                        "(`/operators/stack` has rows).")]


SortColumn = Literal["device_self_us", "host_self_us"]


class OperatorsPayload(TypedDict):
    """`/operators`: the operator table."""

    rows: Annotated[list[OperatorRow], doc("Sorted by `sort_by` descending, ties by name "
                                           "(and shape).")]
    sort_by: Annotated[SortColumn, doc("device_self_us when the trace has device work, else "
                                       "host_self_us.")]
    has_device: Annotated[bool, doc("The trace has device (GPU) work.")]


class CallStackRow(TypedDict):
    """The calls of one operator that share one call stack."""

    name: Annotated[str, doc("Operator name.")]
    input_shape: NotRequired[Annotated[str, doc(_SHAPE)]]
    calls: Annotated[int, doc("Number of calls with this stack.")]
    host_self_us: Annotated[float, doc("Host self time, us (3 decimals).")]
    host_total_us: Annotated[float, doc("Host total time, us.")]
    device_self_us: Annotated[float, doc("Device self time, us.")]
    device_total_us: Annotated[float, doc("Device total time, us.")]
    tc_eligible: Annotated[bool, doc("The operator could use Tensor Cores.")]
    tc_self_pct: Annotated[float, doc("Share of device self time on Tensor Cores, percent.")]
    tc_total_pct: Annotated[float, doc("Share of device total time on Tensor Cores, percent.")]
    call_stack: Annotated[str, doc('The Python call stack, frames joined by ";".')]


class CallStacksPayload(TypedDict):
    """`/operators/stack`: the call stacks of one operator."""

    rows: Annotated[list[CallStackRow], doc("One row per distinct non-empty call stack, sorted "
                                            "by `sort_by` descending.")]
    sort_by: Annotated[SortColumn, doc("As in `/operators`.")]
    has_device: Annotated[bool, doc("The trace has device (GPU) work.")]


_PIE = ("Top-N operators by {}, us (value > 0, descending, ties by label); null when no "
        "operator qualifies. With group_by=operator_input_shape the label is \"name shape\".")


class OperatorPiesPayload(TypedDict):
    """`/operators/pies`: the four top-N operator pies."""

    device_total: Annotated[Optional[list[PieSlice]], doc(_PIE.format("device total time"))]
    device_self: Annotated[Optional[list[PieSlice]], doc(_PIE.format("device self time"))]
    host_total: Annotated[Optional[list[PieSlice]], doc(_PIE.format("host total time"))]
    host_self: Annotated[Optional[list[PieSlice]], doc(_PIE.format("host self time"))]
