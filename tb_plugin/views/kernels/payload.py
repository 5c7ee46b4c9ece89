"""`/kernels` and `/kernels/pies` (`analysis.kernels`)."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import PieSlice, doc

_LAUNCH = "Only with group_by=kernel_op_launch: "


class KernelRow(TypedDict):
    """One kernel name (or, with group_by=kernel_op_launch, one kernel name + launching operator
    + launch configuration) with its summed times."""

    name: Annotated[str, doc("Kernel name.")]
    category: Annotated[str, doc(
        "Op category (GEMM, attention, normalization, elementwise, reduction, communication, "
        "other): by the launching operator, else the kernel name; grouped by kernel name, the "
        "category holding most of its time.")]
    operator: NotRequired[Annotated[str, doc(
        _LAUNCH + 'the operator that launched it ("N/A" outside any operator).')]]
    grid: NotRequired[Annotated[Optional[str], doc(_LAUNCH + 'grid size, e.g. "[4, 106, 1]"; '
                                                   "null when not recorded.")]]
    block: NotRequired[Annotated[Optional[str], doc(_LAUNCH + "block size; null when not "
                                                    "recorded.")]]
    registers_per_thread: NotRequired[Annotated[Optional[int], doc(
        _LAUNCH + "registers per thread; null when not recorded.")]]
    shared_memory: NotRequired[Annotated[Optional[int], doc(
        _LAUNCH + "shared memory per block, bytes; null when not recorded.")]]
    op_tc_eligible: NotRequired[Annotated[bool, doc(
        _LAUNCH + "the launching operator could use Tensor Cores.")]]
    tensor_cores: Annotated[bool, doc("The kernel uses Tensor Cores.")]
    calls: Annotated[int, doc("Number of launches.")]
    total_us: Annotated[float, doc("Summed duration, us (3 decimals).")]
    mean_us: Annotated[float, doc("Mean duration, us.")]
    max_us: Annotated[float, doc("Longest launch, us.")]
    min_us: Annotated[float, doc("Shortest launch, us.")]
    blocks_per_sm: Annotated[Optional[float], doc(
        "Blocks per SM, weighted by duration; null when no kernel of the trace has it.")]
    occupancy_pct: Annotated[Optional[float], doc(
        "Estimated achieved occupancy, percent, weighted by duration; null when no kernel of "
        "the trace has it.")]


class CategoryTime(TypedDict):
    category: Annotated[str, doc("GEMM, attention, normalization, elementwise, reduction, "
                                 "communication, memcpy/memset or other.")]
    events: Annotated[int, doc("Device events in it.")]
    time_us: Annotated[float, doc("Their summed duration, us.")]
    pct: Annotated[float, doc("Share of all device time, percent.")]


class KernelsPayload(TypedDict):
    """`/kernels`: the kernel table."""

    rows: Annotated[list[KernelRow], doc("Sorted by total_us descending, ties by the key "
                                         "columns.")]
    has_blocks_per_sm: Annotated[bool, doc("Some kernel had (or got derived) blocks per SM; "
                                           "when false every row's value is null.")]
    has_occupancy: Annotated[bool, doc("Some kernel had an occupancy; when false every row's "
                                       "value is null.")]
    categories: Annotated[list[CategoryTime], doc(
        "Device time per op category (every category, memcpy/memset included), in the "
        "category order.")]


class TensorCoreShare(TypedDict):
    """Shares of kernel time (they sum to 1)."""

    using: Annotated[float, doc("Fraction (0..1) of kernel time in kernels using Tensor "
                                "Cores.")]
    not_using: Annotated[float, doc("Fraction (0..1) of kernel time in the others.")]


class KernelPiesPayload(TypedDict):
    """`/kernels/pies`: top-N kernels by total time and the Tensor Core share."""

    total: Annotated[list[PieSlice], doc("Top-N kernels by total time, us, descending (ties "
                                         "by name).")]
    tensor_cores: Annotated[Optional[TensorCoreShare], doc("Null when the trace has no "
                                                           "kernels.")]
    matrix_units: Annotated[Literal["tensor cores", "matrix cores"], doc(
        'What the GPU\'s vendor calls its matrix units: "matrix cores" on AMD, else "tensor '
        'cores" (also when unknown).')]
