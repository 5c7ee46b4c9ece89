"""Recommendations v3: advice priced by what it would save, silent when its preconditions do
not hold, root causes before symptoms.

Each rule reads a small `Facts` record (so rules are testable without a trace) and returns at
most one item: `{"id", "severity", "title", "text", "view", "metric", "unit", "start_us",
"end_us", "link", "links", "saving_us", "saving_pct"}`. `view` names the view whose numbers prove
the statement and [`start_us`, `end_us`] (trace us, or null) the time range to look at.
`saving_us` is what the fix would save per step at most (us, null for advice that is not
priced, e.g. a backend choice) and `saving_pct` that share of the step time. A rule that lacks
the data to judge returns nothing instead of guessing. Ids are stable (README: "Recommendation
ids").

Preconditions (each pinned by a test at its boundary):
- launch overhead matters only where the device waited for a launch: `launch_bound` is priced
  by the device idle time spent inside launch calls (`advice_costs`) and is silent below
  `LAUNCH_PCT` of the step, however short the kernels;
- a synchronising call costs the device idle time from its start until the device's next
  event: `device_sync` is priced by that and silent below `SYNC_PCT`;
- no "use CUDA/HIP graphs" on a trace that replays or captures graphs; no idle, launch, sync or
  utilisation advice on a graph capture (its kernels never ran);
- FSDP advice only when FSDP is in the trace (the Distributed view's rule);
- "increase the batch size" only when no cause explains the idle GPU, host computation
  (`host_compute`) included.

Order: what invalidates the profile itself (start-up captured, a foreign step marker) first;
then priced advice, largest saving first (a root cause outranks its symptom: `host_bound` is
priced by the host wait that launch overhead, synchronisation and host computation do not
already explain); then unpriced advice by severity and rule priority. Wording follows the
trace: NVIDIA or AMD (never a CUDA compute capability or "tensor cores" for AMD), DDP or FSDP.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .facts import (
    HIGH,
    LOW,
    MEDIUM,
    SEVERITY_ORDER,
    Facts,
    api_name,
    fmt_time,
    grade,
    graphs_hint,
    join_words,
    make_item,
    pct_saving,
    share_pct,
    share_saving,
    steps_saving,
)
from .slow_steps import rule_slow_steps
from .stalls import rule_device_stall

__all__ = ["Facts", "RULE_IDS", "recommend"]


STARTUP_PCT = 10.0
DATALOADER_THRESHOLD_PCT = 5.0
EXPOSED_COMM_PCT = 10.0
LOW_UTILIZATION_PCT = 50.0
HOST_BOUND_IDLE_PCT = 50.0
HOST_WAIT_SHARE_PCT = 50.0
SHORT_KERNEL_PCT = 50.0
MIN_KERNELS = 100
SYNC_PCT = 2.0
LAUNCH_PCT = 5.0
HOST_COMPUTE_PCT = 20.0
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

def rule_startup(facts: Facts) -> Optional[dict[str, Any]]:
    if facts.steps_us <= 0 or not facts.startup_calls:
        return None
    pct = 100.0 * facts.startup_us / facts.steps_us
    if pct < STARTUP_PCT:
        return None
    calls = join_words([f"{name} {fmt_time(us)}" for name, us in facts.startup_calls[:3]])
    return make_item(
        "startup_captured", grade(pct, 20.0, 40.0), f"{api_name(facts)} start-up was profiled",
        f"{fmt_time(facts.startup_us)} ({pct:.1f}%) of the profiled steps is {api_name(facts)} "
        f"start-up and warm-up ({calls}): the profiler captured initialisation, so every other "
        "number here describes start-up, not training. Profile later: use "
        "torch.profiler.schedule(wait=..., warmup=..., active=...) so the first iterations are "
        "skipped.", "Trace", pct, "%", (("torch.profiler.schedule", URL_SCHEDULE),),
        facts.startup_range)


def rule_foreign_marker(facts: Facts) -> Optional[dict[str, Any]]:
    marker = facts.foreign_marker
    if not marker:
        return None
    return make_item(
        "foreign_step_marker", HIGH, "The step marker comes from another process",
        f"{marker['name']} was recorded by process {marker['pid']}, but this trace's "
        f"operators run in process {marker['ops_pid']}; it lasts "
        f"{fmt_time(marker['dur_us'])}, so step times and the 'Other' share measure that "
        "process's annotation, not this one's work. Profile each process with its own "
        "profiler (one trace per rank) or read the per-operator views.",
        "Trace", marker["dur_us"], "us", (), marker.get("range"))


def _explained_host_wait(facts: Facts, fired: tuple[str, ...]) -> float:
    """Host wait that a more specific cause that fired already prices (launch overhead,
    synchronisation, host computation)."""
    explained = 0.0
    if "launch_bound" in fired:
        explained += facts.launch_idle_us
    if "device_sync" in fired:
        explained += facts.sync_idle_us
    if "host_compute" in fired:
        explained += facts.host_compute_us
    return explained


def rule_host_bound(facts: Facts, fired: tuple[str, ...] = ()) -> Optional[dict[str, Any]]:
    """The device waits for the host: idle >= `HOST_BOUND_IDLE_PCT` of its window and host wait
    >= `HOST_WAIT_SHARE_PCT` of that idle time (both on the device's own timeline). Priced by
    the host wait that no more specific cause in `fired` explains; silent when none is left."""
    idle, wait = facts.gpu_idle_pct, facts.host_wait_pct
    if facts.graph_mode == "capture":
        return None
    if idle is None or wait is None or idle < HOST_BOUND_IDLE_PCT or wait < HOST_WAIT_SHARE_PCT:
        return None
    left = facts.host_wait_us - _explained_host_wait(facts, fired)
    saving = steps_saving(facts, left)
    if left <= 0 or saving is None:
        return None
    steps = max(facts.step_count, 1)
    return make_item(
        "host_bound", grade(idle, 60.0, 80.0), "The step is host-bound",
        f"The GPU is idle {idle:.1f}% of its active window ({fmt_time(facts.idle_us / steps)} "
        f"per step), and in {fmt_time(facts.host_wait_us / steps)} of that idle time "
        f"({wait:.1f}%) it had nothing queued: the next kernel was launched only after the "
        "previous one had finished, so the CPU does not enqueue work fast enough. Reduce host "
        f"work per step (Python overhead, CPU-side ops, synchronising calls){graphs_hint(facts)}"
        ", or compile it (torch.compile).", "GPU Idle", idle, "%",
        (("torch.compile", URL_COMPILE),) + ((("CUDA graphs", URL_CUDA_GRAPHS),)
                                             if facts.graph_mode == "none" else ()),
        facts.largest_gap, saving)


def rule_launch_bound(facts: Facts) -> Optional[dict[str, Any]]:
    """Launch overhead, priced by the device idle time spent inside launch calls: silent on
    graph traces, below `MIN_KERNELS` kernels, below `SHORT_KERNEL_PCT` short kernels, and
    when that idle time is below `LAUNCH_PCT` of the step (a full queue hides launches)."""
    if facts.graph_mode != "none" or facts.kernels < MIN_KERNELS:
        return None
    pct = 100.0 * facts.short_kernels / facts.kernels
    saving = steps_saving(facts, facts.launch_idle_us)
    if pct < SHORT_KERNEL_PCT or saving is None or saving[1] < LAUNCH_PCT:
        return None
    return make_item(
        "launch_bound", grade(saving[1], 10.0, 25.0), "Kernel launches keep the GPU waiting",
        f"{facts.short_kernels} of {facts.kernels} kernels ({pct:.1f}%) run for less time on "
        f"the GPU than their launch call takes on the CPU, and the GPU sits idle inside launch "
        f"calls for {fmt_time(saving[0])} per step ({saving[1]:.1f}% of the step): launch "
        "overhead, not GPU work, sets the pace. Fuse kernels (torch.compile) or replay the step "
        "as a CUDA/HIP graph.", "GPU Idle", saving[1], "%",
        (("torch.compile", URL_COMPILE), ("CUDA graphs", URL_CUDA_GRAPHS)), facts.steps_range,
        saving)


def rule_sync(facts: Facts) -> Optional[dict[str, Any]]:
    """Synchronising calls, priced by the device idle time from each call's start until the
    device's next event; silent below `SYNC_PCT` of the step (a sync on a busy GPU is free)."""
    if facts.graph_mode == "capture" or facts.sync_calls == 0:
        return None
    saving = steps_saving(facts, facts.sync_idle_us)
    if saving is None or saving[1] < SYNC_PCT:
        return None
    pct = saving[1]
    return make_item(
        "device_sync", grade(pct, 5.0, 15.0), "The step synchronises with the device",
        f"{facts.sync_calls} synchronising call{'s' if facts.sync_calls > 1 else ''} "
        f"({join_words(facts.sync_names[:3])}) leave the GPU idle for {fmt_time(saving[0])} "
        f"per step ({pct:.1f}% of the step time): the CPU waits for the GPU, then the GPU "
        "waits for the CPU to enqueue work again. Remove .item(), .cpu(), printing of GPU "
        "tensors and explicit synchronize() from the step, or move them out of the hot loop.",
        "Trace", pct, "%", (("Asynchronous execution", URL_SYNC),), facts.sync_range, saving)


def rule_host_compute(facts: Facts) -> Optional[dict[str, Any]]:
    """CPU work that launches nothing (preprocessing, Python, CPU operators) while no device
    runs anything, on a trace with GPU work: at least `HOST_COMPUTE_PCT` of the step. Priced by
    that time."""
    if not facts.used_devices or facts.graph_mode == "capture" or facts.foreign_marker:
        return None  # no GPU work, none that ran, or steps that measure another process
    saving = steps_saving(facts, facts.host_compute_us)
    if saving is None or saving[1] < HOST_COMPUTE_PCT:
        return None
    pct = saving[1]
    return make_item(
        "host_compute", grade(pct, 30.0, 50.0), "CPU work runs while the GPU waits",
        f"{pct:.1f}% of the step time ({fmt_time(saving[0])} per step) is CPU work that "
        "launches nothing on the GPU, with no GPU work running meanwhile: input preprocessing, "
        "Python or CPU operators inside the step. Move preprocessing into DataLoader workers "
        "(num_workers > 0) or onto the GPU and keep CPU-side operators out of the step; a "
        "larger batch would not help while the CPU sets the pace.", "Trace", pct, "%",
        (("Multi-process data loading", URL_DATALOADER),), facts.steps_range, saving)


def rule_dataloader(facts: Facts) -> Optional[dict[str, Any]]:
    pct = share_pct(facts, "DataLoader")
    if pct is None or pct <= DATALOADER_THRESHOLD_PCT:
        return None
    severity = grade(pct, 15.0, 30.0)
    return make_item(
        "dataloader", severity, "Input data loading is slow",
        f"{pct:.1f}% of the step time is spent in DataLoader: {severity.upper()} (flagged above "
        f"{DATALOADER_THRESHOLD_PCT:g}%). Load batches in background worker processes "
        "(DataLoader num_workers > 0, pin_memory=True) so data loading overlaps with compute.",
        "Overview", pct, "%", (("Multi-process data loading", URL_DATALOADER),),
        facts.dataloader_range, share_saving(facts, "DataLoader"))


def rule_data_parallel(facts: Facts) -> Optional[dict[str, Any]]:
    if not facts.uses_dp or len(facts.used_devices) <= 1:
        return None
    n = len(facts.used_devices)
    return make_item(
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
    return make_item(
        "nccl_backend", MEDIUM, f"Use the nccl backend for {wrapper}",
        f"{wrapper} runs with {backend} on {len(facts.used_devices)} GPU(s). {library} is the "
        "fastest collective library for GPU training.", "Distributed",
        len(facts.used_devices), "GPUs", (("Which backend to use", URL_BACKENDS),))


def rule_exposed_communication(facts: Facts) -> Optional[dict[str, Any]]:
    pct = facts.exposed_comm_pct
    if pct is None or pct <= EXPOSED_COMM_PCT:
        return None
    severity = grade(pct, 20.0, 35.0)
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
    return make_item(
        "communication_not_overlapped", severity, "Communication is not overlapped",
        f"{pct:.1f}% of the step time is communication that no computation overlaps: "
        f"{severity.upper()} (flagged above {EXPOSED_COMM_PCT:g}%). {advice}",
        "Distributed", pct, "%", links, facts.steps_range,
        pct_saving(facts, pct))


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
    severity = grade(pct, 20.0, 50.0)
    if facts.vendor == "amd":
        if facts.matrix_core_kernels > 0:
            return None
        return make_item(
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
    if best < (0, 0) and facts.kernel_capability is not None:
        best = facts.kernel_capability  # no device properties: the kernels name it
    if best < (7, 0):
        return None
    tf32 = (" or allow TF32 for float32 matmuls (torch.set_float32_matmul_precision('high'))"
            if best >= (8, 0) else "")
    return make_item(
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
    return make_item(
        "memory_limit", severity, "Device memory usage is at the limit",
        f"The peak memory allocated on GPU {device} is {pct:.1f}% of its "
        f"{capacity / 1024 ** 3:.1f} GB: {severity.upper()} (flagged above "
        f"{MEMORY_LIMIT_PCT:g}%). Gradient checkpointing or Automatic Mixed Precision reduce "
        "memory use and leave room for larger batches.",
        "Memory", pct, "%",
        (("Gradient checkpointing", URL_CHECKPOINT), ("Automatic Mixed Precision", URL_AMP)))


#: Rules whose finding explains an idle GPU better than "low utilisation" does.
_IDLE_CAUSES = ("startup_captured", "foreign_step_marker", "device_stalled", "host_bound",
                "launch_bound", "device_sync", "dataloader", "communication_not_overlapped",
                "host_compute")


def rule_low_utilization(facts: Facts, fired: tuple[str, ...] = ()) -> Optional[dict[str, Any]]:
    """Only when no more specific cause fired, and never on a graph capture (its kernels did
    not run): then the GPU is idle for want of work."""
    if facts.graph_mode == "capture" or any(rule in _IDLE_CAUSES for rule in fired):
        return None
    low = {d: 100.0 * u for d, u in sorted(facts.gpu_utilization.items())
           if u is not None and 100.0 * u < LOW_UTILIZATION_PCT}
    if not low:
        return None
    worst = min(low.values())
    severity = HIGH if worst < 20.0 else MEDIUM if worst < 35.0 else LOW
    gpus = join_words([f"{d} ({pct:.1f}%)" for d, pct in low.items()])
    subject = f"GPU {gpus} has" if len(low) == 1 else f"GPUs {gpus} have"
    return make_item(
        "low_gpu_utilization", severity, "Low GPU utilization",
        f"{subject} low utilization: {severity.upper()} (flagged below "
        f"{LOW_UTILIZATION_PCT:g}% of the step time with a kernel running), and neither host "
        "launch gaps, synchronisation, data loading nor communication explain it: the GPU has "
        "too little work per step. Increase the batch size (this may affect convergence).",
        "GPU Idle", worst, "%", (), facts.steps_range)


RULES: tuple[Callable[[Facts], Optional[dict[str, Any]]], ...] = (
    rule_startup, rule_foreign_marker, rule_device_stall, rule_launch_bound, rule_sync,
    rule_host_compute, rule_dataloader, rule_exposed_communication, rule_data_parallel, rule_nccl,
    rule_matrix_units, rule_memory, rule_slow_steps,
)
#: Every id a rule can emit, in priority order (README: "Recommendation ids").
RULE_IDS = ("startup_captured", "foreign_step_marker", "device_stalled", "host_bound",
            "launch_bound", "device_sync", "host_compute", "dataloader",
            "communication_not_overlapped", "data_parallel", "nccl_backend",
            "matrix_units_unused", "memory_limit", "low_gpu_utilization", "slow_step")
#: The fix of a rule as a what-if edit (`analysis.whatif`): the engine replays the steps with
#: it for a prediction that follows every dependency (`/whatif?edit=...`).
WHATIF_EDITS = {"launch_bound": "launch=0", "device_sync": "sync=0",
                "dataloader": "dataloader=0", "communication_not_overlapped": "communication=0"}
#: Advice about the profile itself: before any saving.
_PROFILE_RULES = ("startup_captured", "foreign_step_marker", "device_stalled")


def recommend(facts: Facts) -> list[dict[str, Any]]:
    """Items of every rule that fires: the profile's own problems first, then priced advice by
    its saving (largest first), then unpriced advice by severity; rule priority breaks ties."""
    items = [item for rule in RULES if (item := rule(facts)) is not None]
    fired = tuple(item["id"] for item in items)
    host = rule_host_bound(facts, fired)
    if host is not None:
        items.append(host)
    low = rule_low_utilization(facts, fired + ((host["id"],) if host else ()))
    if low is not None:
        items.append(low)
    for item in items:
        item.update(_located(facts, item["start_us"]))
        item["whatif"] = WHATIF_EDITS.get(item["id"])
    return sorted(items, key=_order)


def _located(facts: Facts, start: Optional[float]) -> dict[str, Any]:
    """The step whose span [start, end) holds `start`, and how far into it (us)."""
    for name, lo, hi in facts.step_bounds:
        if start is not None and lo <= start < hi:
            return {"evidence_step": name, "evidence_offset_us": round(start - lo, 2)}
    return {"evidence_step": None, "evidence_offset_us": None}


def _order(item: dict[str, Any]) -> tuple[int, float, int, int]:
    rank = RULE_IDS.index(item["id"])
    if item["id"] in _PROFILE_RULES:
        return (0, 0.0, 0, rank)
    if item["saving_us"] is not None:
        return (1, -item["saving_pct"], 0, rank)
    return (2, 0.0, SEVERITY_ORDER[item["severity"]], rank)
