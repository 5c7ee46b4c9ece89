"""Recommendations v2: graded, quantified advice driven by the diagnosis numbers.

Each rule reads a small `Facts` record (so rules are testable without a trace) and returns at
most one item: `{"id", "severity", "title", "text", "view", "metric", "unit", "start_us",
"end_us", "link", "links"}`. `view` names the view whose numbers prove the statement and
[`start_us`, `end_us`] (trace us, or null) the time range to look at. A rule that lacks the data
to judge returns nothing instead of guessing. Ids are stable (README: "Recommendation ids").

Rule order is priority order among equal severities: what invalidates the profile itself
(start-up captured, a foreign step marker) comes first; low utilisation comes last and only
when no more specific cause explains the idle GPU. Wording follows the trace: NVIDIA or AMD
(never a CUDA compute capability or "tensor cores" for AMD), DDP or FSDP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HIGH, MEDIUM, LOW = "high", "medium", "low"
_SEVERITY_ORDER = {HIGH: 0, MEDIUM: 1, LOW: 2}

STARTUP_PCT = 10.0
DATALOADER_THRESHOLD_PCT = 5.0
EXPOSED_COMM_PCT = 10.0
LOW_UTILIZATION_PCT = 50.0
HOST_BOUND_IDLE_PCT = 50.0
HOST_WAIT_SHARE_PCT = 50.0
SHORT_KERNEL_PCT = 50.0
MIN_KERNELS = 100
SYNC_PCT = 2.0
SYNC_GPU_IDLE_PCT = 20.0
MEMORY_LIMIT_PCT = 90.0

URL_SCHEDULE = "https://pytorch.org/docs/stable/profiler.html#torch.profiler.schedule"
URL_DATALOADER = "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"
URL_DDP = "https://pytorch.org/docs/stable/notes/cuda.html#use-nn-parallel-distributeddataparallel-instead-of-multiprocessing-or-nn-dataparallel"
URL_BACKENDS = "https://pytorch.org/docs/stable/distributed.html#which-backend-to-use"
URL_COMM_HOOKS = "https://pytorch.org/docs/stable/ddp_comm_hooks.html"
URL_FSDP = "https://pytorch.org/docs/stable/fsdp.html"
URL_AMP = "https://pytorch.org/docs/stable/amp.html"
URL_TF32 = "https://pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html"
URL_CHECKPOINT = "https://pytorch.org/docs/stable/checkpoint.html"
URL_CUDA_GRAPHS = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs"
URL_COMPILE = "https://pytorch.org/docs/stable/generated/torch.compile.html"
URL_SYNC = "https://pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution"

Range = Optional[tuple[float, float]]


@dataclass
class Facts:
    """What the rules need to know about one trace (times in us, shares in percent)."""

    average: dict[str, float]  # breakdown averages in us, with "Total"
    vendor: str = "unknown"  # "nvidia" | "amd" | "unknown" (analysis.vendor)
    steps_us: float = 0.0  # summed step lengths
    steps_range: Range = None
    gpu_utilization: dict[int, Optional[float]] = field(default_factory=dict)  # fraction
    used_devices: list[int] = field(default_factory=list)
    device_props: dict[int, dict[str, Any]] = field(default_factory=dict)
    uses_dp: bool = False
    uses_ddp: bool = False
    uses_fsdp: bool = False
    uses_nccl: bool = False
    backend: Optional[str] = None
    memory_peaks: dict[int, float] = field(default_factory=dict)  # GPU id -> peak bytes
    kernel_tc_ratio: Optional[float] = None
    tc_eligible_ops_kernel_ratio: Optional[float] = None
    matrix_core_kernels: int = 0  # AMD MFMA kernels (by name)
    # diagnosis
    startup_calls: list[tuple[str, float]] = field(default_factory=list)  # biggest first
    startup_us: float = 0.0
    startup_range: Range = None
    foreign_marker: Optional[dict[str, Any]] = None  # name, pid, ops_pid, dur_us, range
    gpu_idle_pct: Optional[float] = None  # worst device, of its busy window within steps
    host_wait_pct: Optional[float] = None  # of the idle time between device events
    largest_gap: Range = None
    kernels: int = 0
    short_kernels: int = 0
    launch_cpu_us: float = 0.0
    sync_calls: int = 0
    sync_us: float = 0.0
    sync_names: list[str] = field(default_factory=list)
    sync_range: Range = None
    exposed_comm_pct: Optional[float] = None  # communication not overlapped, of step time
    dataloader_range: Range = None


def _item(rule: str, severity: str, title: str, text: str, view: str, metric: float, unit: str,
          links: tuple[tuple[str, str], ...] = (), where: Range = None) -> dict[str, Any]:
    return {
        "id": rule,
        "severity": severity,
        "title": title,
        "text": text,
        "view": view,
        "metric": round(float(metric), 2),
        "unit": unit,
        "start_us": float(where[0]) if where else None,
        "end_us": float(where[1]) if where else None,
        "link": links[0][1] if links else None,
        "links": [{"label": label, "url": url} for label, url in links],
    }


def _grade(value: float, medium: float, high: float) -> str:
    """Severity of a value that is worse when larger."""
    return HIGH if value >= high else MEDIUM if value >= medium else LOW


def _share_pct(facts: Facts, category: str) -> Optional[float]:
    total = facts.average.get("Total", 0.0)
    return 100.0 * facts.average.get(category, 0.0) / total if total > 0 else None


def _join(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _seconds(us: float) -> str:
    return f"{us / 1e6:.1f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms" if us >= 1e3 else \
        f"{us:.0f} us"


def _api(facts: Facts) -> str:
    return {"amd": "HIP", "nvidia": "CUDA"}.get(facts.vendor, "GPU runtime")


def rule_startup(facts: Facts) -> Optional[dict[str, Any]]:
    if facts.steps_us <= 0 or not facts.startup_calls:
        return None
    pct = 100.0 * facts.startup_us / facts.steps_us
    if pct < STARTUP_PCT:
        return None
    calls = _join([f"{name} {_seconds(us)}" for name, us in facts.startup_calls[:3]])
    return _item(
        "startup_captured", _grade(pct, 20.0, 40.0), f"{_api(facts)} start-up was profiled",
        f"{_seconds(facts.startup_us)} ({pct:.1f}%) of the profiled steps is {_api(facts)} "
        f"start-up and warm-up ({calls}): the profiler captured initialisation, so every other "
        "number here describes start-up, not training. Profile later: use "
        "torch.profiler.schedule(wait=..., warmup=..., active=...) so the first iterations are "
        "skipped.", "Trace", pct, "%", (("torch.profiler.schedule", URL_SCHEDULE),),
        facts.startup_range)


def rule_foreign_marker(facts: Facts) -> Optional[dict[str, Any]]:
    marker = facts.foreign_marker
    if not marker:
        return None
    return _item(
        "foreign_step_marker", HIGH, "The step marker comes from another process",
        f"{marker['name']} was recorded by process {marker['pid']}, but this trace's "
        f"operators run in process {marker['ops_pid']}; it lasts "
        f"{_seconds(marker['dur_us'])}, so step times and the 'Other' share measure that "
        "process's annotation, not this one's work. Profile each process with its own "
        "profiler (one trace per rank) or read the per-operator views.",
        "Trace", marker["dur_us"], "us", (), marker.get("range"))


def rule_host_bound(facts: Facts) -> Optional[dict[str, Any]]:
    idle, wait = facts.gpu_idle_pct, facts.host_wait_pct
    if idle is None or wait is None or idle < HOST_BOUND_IDLE_PCT or wait < HOST_WAIT_SHARE_PCT:
        return None
    return _item(
        "host_bound", _grade(idle, 60.0, 80.0), "The step is host-bound",
        f"The GPU is idle {idle:.1f}% of its active window, and {wait:.1f}% of that idle time "
        "is host wait (the next kernel was launched only after the previous one had finished):"
        " the CPU does not enqueue work fast enough. Reduce host work per step (Python "
        "overhead, CPU-side ops, synchronising calls), capture the step with CUDA/HIP graphs, "
        "or compile it (torch.compile).", "GPU Idle", idle, "%",
        (("torch.compile", URL_COMPILE), ("CUDA graphs", URL_CUDA_GRAPHS)), facts.largest_gap)


def rule_launch_bound(facts: Facts) -> Optional[dict[str, Any]]:
    if facts.kernels < MIN_KERNELS:
        return None
    pct = 100.0 * facts.short_kernels / facts.kernels
    if pct < SHORT_KERNEL_PCT:
        return None
    return _item(
        "launch_bound", _grade(pct, 65.0, 80.0), "Many kernels are shorter than their launch",
        f"{facts.short_kernels} of {facts.kernels} kernels ({pct:.1f}%) run for less time on "
        f"the GPU than their launch call takes on the CPU ({_seconds(facts.launch_cpu_us)} of "
        "launch calls in all): launch overhead dominates. Fuse kernels (torch.compile) or "
        "replay the step as a CUDA/HIP graph.", "GPU Idle", pct, "%",
        (("torch.compile", URL_COMPILE), ("CUDA graphs", URL_CUDA_GRAPHS)), facts.steps_range)


def rule_sync(facts: Facts) -> Optional[dict[str, Any]]:
    if facts.steps_us <= 0 or facts.sync_calls == 0:
        return None
    if facts.gpu_idle_pct is None or facts.gpu_idle_pct < SYNC_GPU_IDLE_PCT:
        return None  # the GPU stays busy: waiting for it costs nothing
    pct = 100.0 * facts.sync_us / facts.steps_us
    if pct < SYNC_PCT:
        return None
    return _item(
        "device_sync", _grade(pct, 5.0, 15.0), "The step synchronises with the device",
        f"{facts.sync_calls} synchronising call{'s' if facts.sync_calls > 1 else ''} "
        f"({_join(facts.sync_names[:3])}) take {_seconds(facts.sync_us)}, {pct:.1f}% of the "
        "step time, while the GPU is idle part of the step: the CPU waits for the GPU and "
        "stops enqueuing work. Remove .item(), .cpu(), printing of GPU tensors and "
        "explicit synchronize() from the step, or move them out of the hot loop.",
        "Trace", pct, "%", (("Asynchronous execution", URL_SYNC),), facts.sync_range)


def rule_dataloader(facts: Facts) -> Optional[dict[str, Any]]:
    pct = _share_pct(facts, "DataLoader")
    if pct is None or pct <= DATALOADER_THRESHOLD_PCT:
        return None
    severity = _grade(pct, 15.0, 30.0)
    return _item(
        "dataloader", severity, "Input data loading is slow",
        f"{pct:.1f}% of the step time is spent in DataLoader: {severity.upper()} (flagged above "
        f"{DATALOADER_THRESHOLD_PCT:g}%). Load batches in background worker processes "
        "(DataLoader num_workers > 0, pin_memory=True) so data loading overlaps with compute.",
        "Overview", pct, "%", (("Multi-process data loading", URL_DATALOADER),),
        facts.dataloader_range)


def rule_data_parallel(facts: Facts) -> Optional[dict[str, Any]]:
    if not facts.uses_dp or len(facts.used_devices) <= 1:
        return None
    n = len(facts.used_devices)
    return _item(
        "data_parallel", MEDIUM, "Use DistributedDataParallel instead of DataParallel",
        f"This run uses DataParallel on {n} GPUs. DistributedDataParallel (one process per GPU) "
        "avoids DataParallel's single-process overheads and is recommended even on one machine.",
        "Trace", n, "GPUs", (("DistributedDataParallel instead of DataParallel", URL_DDP),))


def rule_nccl(facts: Facts) -> Optional[dict[str, Any]]:
    if not (facts.uses_ddp or facts.uses_fsdp) or facts.uses_nccl or not facts.used_devices:
        return None
    if facts.vendor not in ("nvidia", "amd"):
        return None
    library = "RCCL (the nccl backend on ROCm)" if facts.vendor == "amd" else "NCCL"
    wrapper = "FSDP" if facts.uses_fsdp else "DistributedDataParallel"
    backend = f"the {facts.backend} backend" if facts.backend else "a backend other than nccl"
    return _item(
        "nccl_backend", MEDIUM, f"Use the nccl backend for {wrapper}",
        f"{wrapper} runs with {backend} on {len(facts.used_devices)} GPU(s). {library} is the "
        "fastest collective library for GPU training.", "Distributed",
        len(facts.used_devices), "GPUs", (("Which backend to use", URL_BACKENDS),))


def rule_exposed_communication(facts: Facts) -> Optional[dict[str, Any]]:
    pct = facts.exposed_comm_pct
    if pct is None or pct <= EXPOSED_COMM_PCT:
        return None
    severity = _grade(pct, 20.0, 35.0)
    if facts.uses_fsdp:
        advice = ("FSDP: prefetch the next all-gather (backward_prefetch=BACKWARD_PRE, "
                  "forward_prefetch=True), wrap larger units so fewer, bigger collectives run, "
                  "and keep limit_all_gathers on to avoid memory stalls.")
        links: tuple[tuple[str, str], ...] = (("FullyShardedDataParallel", URL_FSDP),)
    elif facts.uses_ddp:
        advice = ("DDP: let the all-reduce overlap the backward pass (a bucket_cap_mb that "
                  "yields several buckets, gradient_as_bucket_view=True), compress gradients "
                  "with a communication hook, or all-reduce less often (no_sync() with gradient "
                  "accumulation).")
        links = (("DDP communication hooks", URL_COMM_HOOKS),)
    else:
        advice = ("Issue collectives asynchronously (async_op=True) and wait on them only "
                  "where the result is needed, so computation runs meanwhile.")
        links = (("Which backend to use", URL_BACKENDS),)
    return _item(
        "communication_not_overlapped", severity, "Communication is not overlapped",
        f"{pct:.1f}% of the step time is communication that no computation overlaps: "
        f"{severity.upper()} (flagged above {EXPOSED_COMM_PCT:g}%). {advice}",
        "Distributed", pct, "%", links, facts.steps_range)


def _capability(props: dict[str, Any]) -> tuple[int, int]:
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if not isinstance(major, int):
        return (-1, -1)
    return (major, minor if isinstance(minor, int) else 0)


def _nvidia_generation(capability: tuple[int, int]) -> str:
    major = capability[0]
    return ("Blackwell" if major >= 10 else "Hopper" if major == 9 else
            "Ampere/Ada" if major == 8 else "Turing" if capability >= (7, 5) else "Volta")


def rule_matrix_units(facts: Facts) -> Optional[dict[str, Any]]:
    """Tensor cores (NVIDIA, Volta and later) or matrix cores (AMD MFMA) left unused."""
    ratio = facts.tc_eligible_ops_kernel_ratio
    if ratio is None or facts.kernel_tc_ratio is None or ratio <= 0.0:
        return None
    if facts.kernel_tc_ratio != 0.0:
        return None
    pct = 100.0 * ratio
    severity = _grade(pct, 20.0, 50.0)
    if facts.vendor == "amd":
        if facts.matrix_core_kernels > 0:
            return None
        return _item(
            "matrix_units_unused", severity, "GEMMs do not use the matrix cores",
            f"Kernels with {pct:.0f}% of the kernel time come from matrix-multiply or "
            "convolution operators, yet no kernel uses the AMD matrix cores (MFMA). Run them "
            "in bf16/fp16 with torch.autocast.", "Kernel", pct, "%",
            (("Automatic Mixed Precision", URL_AMP),))
    if facts.vendor != "nvidia":
        return None
    devices = facts.used_devices or sorted(facts.device_props)[:1]
    capabilities = [_capability(facts.device_props.get(d, {})) for d in devices]
    best = max(capabilities, default=(-1, -1))
    if best < (7, 0):
        return None
    tf32 = (" or allow TF32 for float32 matmuls (torch.set_float32_matmul_precision('high'))"
            if best >= (8, 0) else "")
    return _item(
        "matrix_units_unused", severity, "Enable mixed precision to use Tensor Cores",
        f"Kernels with {pct:.0f}% of the kernel time are launched by Tensor Cores eligible "
        f"operators, yet no kernel uses the Tensor Cores of this {_nvidia_generation(best)} "
        f"GPU: {severity.upper()}. Enable Automatic Mixed Precision (torch.autocast){tf32}.",
        "Kernel", pct, "%", (("Automatic Mixed Precision", URL_AMP), ("TF32", URL_TF32)))


def rule_memory(facts: Facts) -> Optional[dict[str, Any]]:
    """The GPU whose peak allocation is closest to its capacity, if above the limit."""
    worst: Optional[tuple[float, int, float]] = None
    for device, peak in sorted(facts.memory_peaks.items()):
        capacity = facts.device_props.get(device, {}).get("totalGlobalMem")
        if not isinstance(capacity, (int, float)) or capacity <= 0:
            continue
        pct = 100.0 * peak / capacity
        if pct > MEMORY_LIMIT_PCT and (worst is None or pct > worst[0]):
            worst = (pct, device, capacity)
    if worst is None:
        return None
    pct, device, capacity = worst
    severity = HIGH if pct >= 95.0 else MEDIUM
    return _item(
        "memory_limit", severity, "Device memory usage is at the limit",
        f"The peak memory allocated on GPU {device} is {pct:.1f}% of its "
        f"{capacity / 1024 ** 3:.1f} GB: {severity.upper()} (flagged above "
        f"{MEMORY_LIMIT_PCT:g}%). Gradient checkpointing or Automatic Mixed Precision reduce "
        "memory use and leave room for larger batches.",
        "Memory", pct, "%",
        (("Gradient checkpointing", URL_CHECKPOINT), ("Automatic Mixed Precision", URL_AMP)))


#: Rules whose finding explains an idle GPU better than "low utilisation" does.
_IDLE_CAUSES = ("startup_captured", "foreign_step_marker", "host_bound", "launch_bound",
                "device_sync", "dataloader", "communication_not_overlapped")


def rule_low_utilization(facts: Facts, fired: tuple[str, ...] = ()) -> Optional[dict[str, Any]]:
    """Only when no more specific cause fired: then the GPU is idle for want of work."""
    if any(rule in _IDLE_CAUSES for rule in fired):
        return None
    low = {d: 100.0 * u for d, u in sorted(facts.gpu_utilization.items())
           if u is not None and 100.0 * u < LOW_UTILIZATION_PCT}
    if not low:
        return None
    worst = min(low.values())
    severity = HIGH if worst < 20.0 else MEDIUM if worst < 35.0 else LOW
    gpus = _join([f"{d} ({pct:.1f}%)" for d, pct in low.items()])
    subject = f"GPU {gpus} has" if len(low) == 1 else f"GPUs {gpus} have"
    return _item(
        "low_gpu_utilization", severity, "Low GPU utilization",
        f"{subject} low utilization: {severity.upper()} (flagged below "
        f"{LOW_UTILIZATION_PCT:g}% of the step time with a kernel running), and neither host "
        "launch gaps, synchronisation, data loading nor communication explain it: the GPU has "
        "too little work per step. Increase the batch size (this may affect convergence).",
        "GPU Idle", worst, "%", (), facts.steps_range)


RULES: tuple[Callable[[Facts], Optional[dict[str, Any]]], ...] = (
    rule_startup, rule_foreign_marker, rule_host_bound, rule_launch_bound, rule_sync,
    rule_dataloader, rule_exposed_communication, rule_data_parallel, rule_nccl,
    rule_matrix_units, rule_memory,
)
#: Every id a rule can emit, in priority order (README: "Recommendation ids").
RULE_IDS = ("startup_captured", "foreign_step_marker", "host_bound", "launch_bound",
            "device_sync", "dataloader", "communication_not_overlapped", "data_parallel",
            "nccl_backend", "matrix_units_unused", "memory_limit", "low_gpu_utilization")


def recommend(facts: Facts) -> list[dict[str, Any]]:
    """Items of every rule that fires, most severe first (priority order breaks ties)."""
    items = [item for rule in RULES if (item := rule(facts)) is not None]
    low = rule_low_utilization(facts, tuple(item["id"] for item in items))
    if low is not None:
        items.append(low)
    return sorted(items, key=lambda item: (_SEVERITY_ORDER[item["severity"]],
                                           RULE_IDS.index(item["id"])))
