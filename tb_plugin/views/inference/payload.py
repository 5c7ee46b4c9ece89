"""`/inference` (`analysis.inference.view.build_inference`): the serving steps of one vLLM or
SGLang trace, their phases, the steady-state window, time by op category per phase, per-token
latency and decode memory-bandwidth utilization. Times are trace us; sizes bytes."""

from typing import Annotated, Literal, Optional

from typing_extensions import TypedDict

from ...payloads.common import doc

Phase = Literal["prefill", "decode", "mixed", "idle", "other"]
StepState = Literal["steady", "warm-up", "capture", "idle"]


class StepRow(TypedDict):
    """One serving step (an engine's step annotation; nested ones merged)."""

    step: Annotated[int, doc("Step number in start order, from 0.")]
    name: Annotated[str, doc("The outermost annotation's name.")]
    phase: Annotated[Phase, doc("prefill, decode, mixed, idle or other.")]
    state: Annotated[StepState, doc(
        "steady (in the steady-state window), warm-up, capture or idle (left out).")]
    source: Annotated[str, doc('Annotation format(s): "vllm", "sglang" or "vllm+sglang".')]
    mode: Annotated[Optional[str], doc("SGLang's forward mode (DECODE, EXTEND...); null.")]
    requests: Annotated[Optional[int], doc("Requests in the batch; null when not stated.")]
    context_requests: Annotated[Optional[int], doc("Prefill (context) requests; null.")]
    generation_requests: Annotated[Optional[int], doc("Decode (generation) requests; null.")]
    tokens: Annotated[Optional[int], doc("Tokens processed in the step; null.")]
    kv_tokens: Annotated[Optional[int], doc(
        "KV tokens the step's requests attend (Σ N_KV, `sk`); null when not stated.")]
    start_us: Annotated[float, doc("Host annotation start, trace us.")]
    host_us: Annotated[float, doc("Host annotation duration, us.")]
    device_events: Annotated[int, doc("Kernels, copies and sets launched inside the step.")]
    gpu_us: Annotated[float, doc("Union of those device events' intervals, us.")]
    span_us: Annotated[Optional[float], doc(
        "First device start to last device end, us; null without device work.")]
    time_us: Annotated[float, doc("gpu_us, or host_us for a step that launched nothing.")]
    us_per_token: Annotated[Optional[float], doc("time_us / tokens; null without tokens.")]
    bytes: Annotated[Optional[float], doc(
        "Estimated HBM bytes moved (weights + KV read), null when not estimable.")]
    bandwidth_tbps: Annotated[Optional[float], doc("bytes / gpu_us, TB/s; null.")]
    bandwidth_pct: Annotated[Optional[float], doc(
        "bandwidth_tbps / the device's peak HBM bandwidth, %; null.")]
    bytes_reason: Annotated[Optional[str], doc("Why bytes is null; null when estimated.")]


class CategoryTime(TypedDict):
    """Device time of one op category (`analysis.op_categories`) in a phase."""

    category: Annotated[str, doc("GEMM, attention, normalization, elementwise, reduction, "
                                 "communication, memcpy/memset or other.")]
    time_us: Annotated[float, doc("Device event time (sum of durations), us.")]
    pct: Annotated[float, doc("Share of the phase's device event time, %.")]


class PhaseRow(TypedDict):
    """One phase over the steady-state steps."""

    phase: Annotated[Phase, doc("prefill, decode, mixed, idle or other.")]
    steps: Annotated[int, doc("Steady-state steps of this phase.")]
    mean_requests: Annotated[Optional[float], doc("Mean requests per step; null.")]
    tokens: Annotated[int, doc("Tokens processed (steps with a token count).")]
    time_us: Annotated[float, doc("Σ time_us of the steps, us.")]
    mean_step_us: Annotated[float, doc("time_us / steps, us.")]
    us_per_token: Annotated[Optional[float], doc(
        "Σ time_us / Σ tokens over the steps with a token count, us; null.")]
    tokens_per_s: Annotated[Optional[float], doc("Σ tokens / Σ time_us x 1e6; null.")]
    inter_token_latency_us: Annotated[Optional[float], doc(
        "Decode only: mean step time (every running request gets one token per decode "
        "step), us; null for other phases.")]
    categories: Annotated[list[CategoryTime], doc("Every op category, in the fixed order.")]
    bandwidth_steps: Annotated[int, doc("Steps whose bytes are estimable.")]
    mean_bytes: Annotated[Optional[float], doc("Mean estimated bytes per such step; null.")]
    bandwidth_tbps: Annotated[Optional[float], doc(
        "Σ bytes / Σ gpu_us of those steps, TB/s; null.")]
    bandwidth_pct: Annotated[Optional[float], doc(
        "bandwidth_tbps / peak HBM bandwidth, %; null when unknown.")]


class SteadyWindow(TypedDict):
    """The steady-state window: which steps count and why the others do not."""

    steps: Annotated[int, doc("Steady steps.")]
    first_step: Annotated[Optional[int], doc("First steady step; null when none.")]
    last_step: Annotated[Optional[int], doc("Last steady step; null when none.")]
    warmup: Annotated[int, doc("Leading steps left out as warm-up.")]
    capture: Annotated[int, doc("Steps left out as graph capture.")]
    idle: Annotated[int, doc("Idle (or unknown-phase) steps left out.")]
    warmup_factor: Annotated[float, doc("The warm-up rule's factor over the phase median.")]


class InferenceDevice(TypedDict):
    """The GPU the steps ran on and its peak HBM bandwidth."""

    device: Annotated[Optional[int], doc("GPU index; null without device work.")]
    name: Annotated[Optional[str], doc("Device name from deviceProperties; null.")]
    peaks_model: Annotated[Optional[str], doc("Matched row of the peak table; null.")]
    memory_tbps: Annotated[Optional[float], doc("Peak HBM bandwidth, TB/s; null.")]


class InferencePayload(TypedDict):
    """The Inference view of one worker span."""

    steps: Annotated[list[StepRow], doc("Every step (at most `max_steps`), in start order.")]
    total_steps: Annotated[int, doc("Steps in the trace.")]
    max_steps: Annotated[int, doc("The cap on `steps`.")]
    steady: Annotated[SteadyWindow, doc("The steady-state window.")]
    phases: Annotated[list[PhaseRow], doc("Per phase with steady steps, in phase order.")]
    device: Annotated[InferenceDevice, doc("The GPU of the steps' device work.")]
    formulas: Annotated[dict[str, str], doc("The rule behind each number, as the UI shows it.")]
    notes: Annotated[list[str], doc("Sentences for the UI (capture, graphs, estimates).")]
