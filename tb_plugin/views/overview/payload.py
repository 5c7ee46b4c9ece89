"""`/overview`: step-time breakdown, GPU summary, environment and recommendations
(`analysis.overview.build_overview`)."""

from typing import Annotated, Literal, Optional

from typing_extensions import NotRequired, TypedDict

from ...payloads.common import ViewName, doc

Category = Literal["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader",
                   "CPU Exec", "Other"]
"""A step-time category (`analysis.breakdown.CATEGORIES`)."""

_US = "us of this category in the step (exclusive: the categories of a step sum to its total)."

# Functional syntax: "CPU Exec" is not an identifier.
StepBreakdown = TypedDict("StepBreakdown", {
    "Kernel": Annotated[float, doc("GPU kernels, " + _US)],
    "Memcpy": Annotated[float, doc("GPU memory copies, " + _US)],
    "Memset": Annotated[float, doc("GPU memsets, " + _US)],
    "Communication": Annotated[float, doc("Communication (NCCL/gloo) ops, " + _US)],
    "Runtime": Annotated[float, doc("CUDA runtime calls on the host, " + _US)],
    "DataLoader": Annotated[float, doc("Data loading, " + _US)],
    "CPU Exec": Annotated[float, doc("Other host operators, " + _US)],
    "Other": Annotated[float, doc("Time covered by none of the above, " + _US)],
})


class OverviewStep(TypedDict):
    """One profiler step."""

    name: Annotated[str, doc('Step name: the N of ProfilerStep#N, or "0" for a trace without '
                             "step markers.")]
    total_us: Annotated[float, doc("Step duration, us.")]
    breakdown_us: Annotated[StepBreakdown, doc("Time per category, us; always all eight.")]


class OverviewAverage(TypedDict):
    """The mean over all steps."""

    total_us: Annotated[float, doc("Mean step duration, us.")]
    breakdown_us: Annotated[StepBreakdown, doc("Mean time per category, us.")]


class OverviewGpu(TypedDict):
    """One GPU that ran work in this trace."""

    id: Annotated[int, doc("Device index.")]
    name: Annotated[Optional[str], doc("Device name from the trace's device properties; null "
                                       "when the trace has none.")]
    memory_gb: Annotated[Optional[float], doc("Total device memory, GiB (2 decimals); null when "
                                              "unknown.")]
    compute_capability: Annotated[Optional[str], doc(
        'CUDA "major.minor"; null when unknown and always null on AMD GPUs (see architecture).')]
    vendor: Annotated[Optional[str], doc('"NVIDIA" or "AMD"; null when unknown.')]
    architecture: Annotated[Optional[str], doc(
        'Generation and target, e.g. "Hopper (sm_90)", "CDNA3 (gfx942)"; null when unknown.')]
    peaks_model: Annotated[Optional[str], doc(
        "The row of the hardware peaks table matched (see `/roofline`); null: unknown device.")]
    mfu_pct: Annotated[Optional[float], doc(
        "Model FLOPs utilisation over the steps, percent (FLOPs at the device's peak for "
        "the precision they ran in / step time; operators above the roof left out); null when "
        "the device's peaks are unknown.")]
    mbu_pct: Annotated[Optional[float], doc(
        "Memory-bandwidth utilisation over the steps, percent (bytes the operators moved / "
        "(step time x peak bandwidth)); null when the device's peaks are unknown.")]
    matrix_units: Annotated[Literal["tensor cores", "matrix cores"], doc(
        'What the vendor calls its matrix units: "matrix cores" on AMD, else "tensor cores".')]
    peaks_reason: Annotated[Optional[str], doc(
        "Why the peaks (hence MFU) are null though the device is listed: its properties could "
        "not be read (see `/roofline`); null otherwise.")]
    utilization_pct: Annotated[Optional[float], doc("GPU utilization: share of the steps' time "
                                                    "with a kernel running, percent.")]
    sm_efficiency_pct: Annotated[Optional[float], doc("Estimated SM efficiency, percent; null "
                                                      "without the kernels' blocks/SM counts.")]
    achieved_occupancy_pct: Annotated[Optional[float], doc(
        "Estimated achieved occupancy (kernel-time weighted), percent; null when unknown.")]
    tensor_core_pct: Annotated[Optional[float], doc(
        "Share of kernel time on tensor cores (AMD: matrix cores), percent; null when "
        "unavailable.")]


class RecommendationLink(TypedDict):
    label: Annotated[str, doc("Link text.")]
    url: Annotated[str, doc("Documentation URL.")]


RecommendationId = Literal[
    "startup_captured", "foreign_step_marker", "device_stalled", "host_bound", "launch_bound",
    "device_sync",
    "host_compute", "dataloader", "communication_not_overlapped", "data_parallel",
    "nccl_backend", "matrix_units_unused", "memory_limit", "low_gpu_utilization", "slow_step",
    "straggler"]
"""Stable rule ids (`analysis.advice.recommendations.RULE_IDS`; README: "Recommendation ids")."""


class Recommendation(TypedDict):
    """One performance recommendation (`analysis.advice.recommendations`): problems of the profile
    itself first, then priced advice by its saving, then unpriced advice by severity."""

    id: Annotated[RecommendationId, doc("The rule that fired.")]
    severity: Annotated[Literal["high", "medium", "low"], doc(
        "The grade of the measured value (orders unpriced advice).")]
    title: Annotated[str, doc("Short headline (plain text).")]
    text: Annotated[str, doc("Explanation with the measured value and threshold (plain text).")]
    view: Annotated[ViewName, doc("The view that shows the evidence.")]
    metric: Annotated[float, doc("The measured value (2 decimals), in `unit`.")]
    unit: Annotated[str, doc('Unit of `metric`, e.g. "%" or "GPUs".')]
    start_us: Annotated[Optional[float], doc("Start of the time range that proves it (trace "
                                             "us), null when the whole trace does.")]
    end_us: Annotated[Optional[float], doc("End of that range (trace us), or null.")]
    link: Annotated[Optional[str], doc("URL of the first link, null when there is none.")]
    links: Annotated[list[RecommendationLink], doc("Further reading.")]
    saving_us: Annotated[Optional[float], doc(
        "What the fix would save per step at most (us, 2 decimals); null when not priced.")]
    saving_pct: Annotated[Optional[float], doc(
        "`saving_us` as a share of the step time (%, 2 decimals); null when not priced.")]
    evidence_step: Annotated[Optional[str], doc(
        "The step whose span holds `start_us`; null when none does (or no range).")]
    evidence_offset_us: Annotated[Optional[float], doc(
        "`start_us` minus that step's start (us, 2 decimals); null with `evidence_step`.")]
    whatif: Annotated[Optional[str], doc(
        "The fix as a what-if edit for `/whatif` (e.g. `launch=0`), whose replay of the steps "
        "predicts the saving through every dependency; a run-level edit (`rank:WORKER=0`, the "
        "straggler's) is for `/whatif/run`; null when the fix is not one edit.")]


class DistributedInfo(TypedDict):
    """The trace's `distributedInfo`, only the keys it has."""

    backend: NotRequired[Annotated[str, doc('Process-group backend, e.g. "nccl", "gloo".')]]
    rank: NotRequired[Annotated[int, doc("This worker's rank.")]]
    world_size: NotRequired[Annotated[int, doc("Number of ranks.")]]


class Environment(TypedDict):
    device_type: Annotated[Literal["GPU", "CPU"], doc("GPU when the trace has device work.")]
    gpu_count: Annotated[int, doc("Number of GPUs in `gpus`.")]
    framework: Annotated[Optional[str], doc("The trace's `Framework` field (e.g. "
                                            '"pytorch-lightning"), null when absent.')]
    distributed: Annotated[Optional[DistributedInfo], doc("Distributed setup, null for a "
                                                          "single-process trace.")]


Cause = Literal["communication", "synchronisation", "data_loading", "host_compute", "device",
                "host_stall"]
"""What a step's time went to (`analysis.variance.steps.CAUSES`, exclusive in that order)."""


class CauseGrowth(TypedDict):
    """Per cause, its us in the step minus its median over the steps (us, 3 decimals)."""

    communication: float
    synchronisation: float
    data_loading: float
    host_compute: float
    device: float
    host_stall: float


class SlowStep(TypedDict):
    """One outlier step (robust z above `z_threshold`), slowest first."""

    step: Annotated[str, doc("Step name.")]
    total_us: Annotated[float, doc("Step duration, us.")]
    excess_us: Annotated[float, doc("Duration minus the median step's, us.")]
    z: Annotated[float, doc("Robust z-score: 0.6745 (t - median) / MAD (MAD 0: "
                            "(t - median) / (1.2533 mean absolute deviation)).")]
    cause: Annotated[Cause, doc("The cause whose time grew most over its median (ties: the "
                                "first in the cause order).")]
    cause_us: Annotated[float, doc("That growth, us.")]
    growth_us: Annotated[CauseGrowth, doc("Every cause's growth, us (negative: it shrank).")]
    start_us: Annotated[Optional[float], doc("Start of the longest range of the cause in the "
                                             "step (trace us); null when it has none.")]
    end_us: Annotated[Optional[float], doc("End of that range (trace us), or null.")]
    evidence_offset_us: Annotated[Optional[float], doc("`start_us` minus the step's start, us.")]


class StepVariance(TypedDict):
    """Step-time variance and slow-step root cause (`analysis.variance.steps`)."""

    steps: Annotated[int, doc("Number of steps.")]
    mean_us: Annotated[float, doc("Mean step duration, us.")]
    median_us: Annotated[float, doc("Median step duration, us.")]
    std_us: Annotated[float, doc("Population standard deviation of the step durations, us.")]
    cv_pct: Annotated[Optional[float], doc("std / mean, percent; null without steps.")]
    z_threshold: Annotated[float, doc("A step is an outlier when its robust z is above this "
                                      "(strict).")]
    outliers: Annotated[list[SlowStep], doc("Slow outlier steps, slowest first (two steps or "
                                            "fewer never hold one).")]


class OverviewPayload(TypedDict):
    """`/overview`: the overview of one worker span."""

    steps: Annotated[list[OverviewStep], doc("One entry per step, in order.")]
    average: Annotated[OverviewAverage, doc("Mean over the steps.")]
    categories: Annotated[list[Category], doc("Categories to show, in priority order.")]
    gpus: Annotated[list[OverviewGpu], doc("GPUs that ran work.")]
    recommendations: Annotated[list[Recommendation], doc("Performance recommendations.")]
    environment: Annotated[Environment, doc("Device and distributed setup.")]
    notes: Annotated[list[str], doc("Human-readable caveats (fallback step, trimmed steps...).")]
    variance: Annotated[StepVariance, doc("Step-time variance and the slow steps' causes.")]


class LateRank(TypedDict):
    """The rank that made one step's collectives wait most."""

    worker: Annotated[str, doc("The last arriver with the largest summed skew in the step.")]
    skew_us: Annotated[float, doc("That sum of skews (us): how late it was in the step.")]


class RunAdvicePayload(TypedDict):
    """`/overview/run`: the run-level advice of one span (`analysis.advice.straggler`), shown
    before each worker's own recommendations."""

    recommendations: Annotated[list[Recommendation], doc(
        "Run-level recommendations (the straggler), to show first after the profile's own "
        "problems; priced per rank and step.")]
    silences: Annotated[list[RecommendationId], doc(
        "Ids of a worker's own recommendations these explain, to leave out.")]
    straggler: Annotated[Optional[str], doc("The straggler worker, null when none.")]
    late_by_step: Annotated[dict[str, LateRank], doc(
        "Per step name, the rank its collectives waited for most (a slow step's communication "
        "wait names it); steps without a skewed collective are absent.")]
    skipped: Annotated[dict[str, str], doc("Workers left out, with the reason.")]
