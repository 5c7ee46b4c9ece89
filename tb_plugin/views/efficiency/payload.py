"""`/compiled` (`analysis.efficiency.compiled.build_compiled`) and `/roofline`
(`analysis.efficiency.roofline.build_roofline`)."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc

MatrixUnits = Literal["tensor cores", "matrix cores"]
AboveRoof = Literal["algorithmic_flops", "precision", "overlap", "bytes", "unknown"]


class InductorKernel(TypedDict):
    """One Inductor-generated kernel op (Triton launch or C++ kernel) of a region."""

    name: Annotated[str, doc("Kernel op name, e.g. triton_poi_fused_add_cos_sin_0.")]
    file: Annotated[Optional[str], doc(
        "Inductor source file: `kernel_file`, or for C++ kernels the generated wrapper module "
        "seen in the Python stack; null when not recorded.")]
    line: Annotated[Optional[int], doc("Line in `file` (C++ kernels' wrapper call); null.")]
    hash: Annotated[Optional[str], doc("`kernel_hash`; null when not recorded.")]
    backend: Annotated[Optional[str], doc('"triton", "cpp"...; null when not recorded.')]
    fused: Annotated[str, doc('The eager ops the name says were fused ("add_cos_sin"), as '
                              'written; "" when none.')]
    calls: Annotated[int, doc("Calls.")]
    host_us: Annotated[float, doc("Host time of the kernel op (launch), us.")]
    device_us: Annotated[float, doc("Device time of the kernels it launched, us.")]
    device_kernels: Annotated[int, doc("Device kernels it launched.")]


class ExternOp(TypedDict):
    """An outermost aten op the compiled graph still calls (mm, attention...)."""

    name: Annotated[str, doc("Operator name.")]
    calls: Annotated[int, doc("Calls.")]
    host_us: Annotated[float, doc("Host time, us.")]
    device_us: Annotated[float, doc("Device time of its kernels, us.")]


class CompiledRegion(TypedDict):
    """One compiled region (all its calls summed)."""

    name: Annotated[str, doc('"Torch-Compiled Region: <frame>/<compile id>" or '
                             '"CompiledFunctionBackward".')]
    calls: Annotated[int, doc("Calls.")]
    host_us: Annotated[float, doc("Host time inside the region, us.")]
    guard_us: Annotated[float, doc("Guard checks (TorchDynamo Cache Lookup) before it, us.")]
    launch_us: Annotated[float, doc("Kernel launch calls made inside it, us.")]
    device_us: Annotated[float, doc("Device time of the kernels launched inside it, us.")]
    device_kernels: Annotated[int, doc("Device kernels launched inside it.")]
    inductor_kernels: Annotated[list[InductorKernel], doc("By device then host time.")]
    extern_ops: Annotated[list[ExternOp], doc("By device then host time.")]


class CompiledPayload(TypedDict):
    """`/compiled`: torch.compile regions -> Inductor kernels -> device time."""

    available: Annotated[bool, doc("The trace has compiled regions or Inductor kernels.")]
    regions: Annotated[list[CompiledRegion], doc("By device then host time, descending.")]
    inductor_kernels: Annotated[int, doc("Inductor kernel op calls in the trace.")]


class RooflineDevice(TypedDict):
    """The GPU the roofline is drawn for (the one that ran most kernels)."""

    id: Annotated[int, doc("Device index.")]
    name: Annotated[Optional[str], doc("Device name; null when unknown.")]
    vendor: Annotated[Optional[str], doc('"NVIDIA", "AMD"; null when unknown.')]
    architecture: Annotated[Optional[str], doc('e.g. "Ampere (sm_80)", "CDNA2 (gfx90a)".')]
    peaks_model: Annotated[Optional[str], doc("Matched peaks row; null: unknown device.")]
    matrix_units: Annotated[MatrixUnits, doc(
        'What the vendor calls its matrix units: "matrix cores" on AMD, else "tensor cores".')]
    peak_tflops: Annotated[Optional[dict[str, float]], doc(
        "Peak dense TFLOP/s per precision the chip has (fp64, fp64_matrix, fp32, tf32, bf16, "
        "fp16, fp8, fp6, fp4, int8).")]
    memory_tbps: Annotated[Optional[float], doc("Peak memory bandwidth, TB/s.")]
    peaks_reason: Annotated[Optional[str], doc(
        "Why vendor/architecture/peaks are null though the trace lists the device (its "
        "properties could not be read); null otherwise.")]


class RooflineRow(TypedDict):
    """One operator name and dtype (outermost FLOP-carrying calls only)."""

    name: Annotated[str, doc("Operator name.")]
    dtype: Annotated[str, doc('dtype of its first tensor ("bf16", "fp32"...; "unknown").')]
    precision: Annotated[str, doc(
        'The math it ran, which picks its peak: from its tensor-core kernels\' names (e.g. '
        '"tf32" for an fp32 GEMM on tensor cores, "fp8"/"fp4" for MX GEMMs), else its dtype; '
        "one of the keys of the device's peak_tflops (a missing one falls back to the next "
        "wider precision the chip has).")]
    calls: Annotated[int, doc("Calls.")]
    flops: Annotated[Optional[float], doc("FLOPs summed; null when unknown.")]
    bytes: Annotated[Optional[float], doc("Bytes moved summed; null when unknown.")]
    time_us: Annotated[float, doc("Device time (GPU trace) or host time (CPU trace), us.")]
    achieved_tflops: Annotated[Optional[float], doc("FLOPs / time, TFLOP/s.")]
    achieved_tbps: Annotated[Optional[float], doc("Bytes / time, TB/s.")]
    intensity: Annotated[Optional[float], doc("Arithmetic intensity, FLOPs per byte.")]
    bound: Annotated[Optional[Literal["compute", "memory"]], doc(
        "Above or below the device's ridge point for its dtype; null without peaks.")]
    peak_tflops: Annotated[Optional[float], doc("Peak of its precision, TFLOP/s; null.")]
    estimate: Annotated[bool, doc("Some calls' FLOPs/bytes come from shape formulas, not a "
                                  "recorded `flops`/`kernel_flop`.")]
    flops_reason: Annotated[Optional[str], doc(
        "Why some calls' FLOPs are unknown (a geometry the trace did not record, an invalid "
        "stride...); those calls count 0 FLOPs in the sums and in MFU. Null when all known.")]
    mbu_pct: Annotated[Optional[float], doc(
        "Memory-bandwidth utilisation: achieved TB/s / peak TB/s, percent; null without "
        "peaks or bytes.")]
    above_roof: Annotated[Optional[AboveRoof], doc(
        "Set when achieved TFLOP/s is more than 5% above its roof min(peak, intensity x "
        "bandwidth): the likely reason. algorithmic_flops: a Winograd/FFT "
        "convolution kernel (fewer multiplies than counted); precision: under the peak of a "
        "faster precision the chip has; overlap: its kernels overlapped other kernels; bytes: "
        "only the bandwidth roof is exceeded (cache-served bytes counted); unknown. Such rows "
        "are left out of MFU and MBU. Null when at or under the roof.")]


class RooflineStep(TypedDict):
    """FLOPs and MFU of one profiler step."""

    step: Annotated[str, doc("Step name.")]
    flops: Annotated[float, doc("FLOPs of the operators that started in the step.")]
    bytes: Annotated[float, doc("Bytes moved by those operators (flagged rows left out).")]
    tflops: Annotated[Optional[float], doc("FLOPs / step duration, TFLOP/s.")]
    mfu_pct: Annotated[Optional[float], doc("Model FLOPs utilisation, percent (each operator at "
                                            "the peak of its precision; rows above the roof "
                                            "left out); null without peaks.")]
    mbu_pct: Annotated[Optional[float], doc("Memory-bandwidth utilisation: bytes / (duration x "
                                            "peak bandwidth), percent; null without peaks.")]


class RooflinePayload(TypedDict):
    """`/roofline`: FLOPs, bytes, roofline and MFU."""

    device: Annotated[Optional[RooflineDevice], doc("Null on a CPU-only trace.")]
    time_basis: Annotated[Literal["device", "host"], doc("What `time_us` measures.")]
    rows: Annotated[list[RooflineRow], doc("By FLOPs descending, ties by name.")]
    steps: Annotated[list[RooflineStep], doc("One per step.")]
