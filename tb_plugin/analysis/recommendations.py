"""Performance recommendations (spec 3.15), as structured, graded, quantified items.

Each rule reads a small `Facts` record (so rules are testable without a trace) and returns at
most one item: `{"id", "severity", "title", "text", "view", "metric", "unit", "link", "links"}`.
`view` names the view whose numbers back the statement. Fixed reference bugs: the communication
link is a real link, the low-utilization sentence lists GPUs grammatically, the memory rule
compares only GPU peaks against that GPU's own memory, and a zero step time raises nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HIGH, MEDIUM, LOW = "high", "medium", "low"
_SEVERITY_ORDER = {HIGH: 0, MEDIUM: 1, LOW: 2}

DATALOADER_THRESHOLD_PCT = 5.0
COMMUNICATION_THRESHOLD_PCT = 10.0
LOW_UTILIZATION_PCT = 50.0
MEMORY_LIMIT_PCT = 90.0

URL_DATALOADER = "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"
URL_DDP = "https://pytorch.org/docs/stable/notes/cuda.html#use-nn-parallel-distributeddataparallel-instead-of-multiprocessing-or-nn-dataparallel"
URL_BACKENDS = "https://pytorch.org/docs/stable/distributed.html#which-backend-to-use"
URL_COMM_HOOKS = "https://pytorch.org/docs/stable/ddp_comm_hooks.html"
URL_LAMB = "https://nvidia.github.io/apex/optimizers.html#apex.optimizers.FusedLAMB"
URL_AMP = "https://pytorch.org/docs/stable/amp.html"
URL_CHECKPOINT = "https://pytorch.org/docs/stable/checkpoint.html"


@dataclass
class Facts:
    """What the rules need to know about one trace."""

    average: dict[str, float]  # breakdown averages in us, with "Total"
    gpu_utilization: dict[int, Optional[float]] = field(default_factory=dict)  # fraction
    used_devices: list[int] = field(default_factory=list)  # GPUs that ran device work
    device_props: dict[int, dict[str, Any]] = field(default_factory=dict)
    uses_dp: bool = False
    uses_ddp: bool = False
    uses_nccl: bool = False
    backend: Optional[str] = None  # distributedInfo.backend
    memory_peaks: dict[int, float] = field(default_factory=dict)  # GPU id -> peak bytes allocated
    kernel_tc_ratio: Optional[float] = None  # share of kernel time on Tensor Cores
    tc_eligible_ops_kernel_ratio: Optional[float] = None


def _item(rule: str, severity: str, title: str, text: str, view: str, metric: float, unit: str,
          links: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    return {
        "id": rule,
        "severity": severity,
        "title": title,
        "text": text,
        "view": view,
        "metric": round(float(metric), 2),
        "unit": unit,
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
        "Overview", pct, "%", (("Multi-process data loading", URL_DATALOADER),))


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
    if not facts.uses_ddp or facts.uses_nccl:
        return None
    capable = [d for d, p in facts.device_props.items() if _capability(p) >= (3, 5)]
    if not capable:
        return None
    backend = f"the {facts.backend} backend" if facts.backend else "a backend other than NCCL"
    return _item(
        "nccl_backend", MEDIUM, "Use the NCCL backend for DistributedDataParallel",
        f"DistributedDataParallel runs with {backend} on GPUs that support NCCL (compute "
        "capability 3.5 or higher). NCCL is the fastest backend for GPU training and the "
        "recommended one for DDP.",
        "Distributed", len(capable), "GPUs", (("Which backend to use", URL_BACKENDS),))


def rule_communication(facts: Facts) -> Optional[dict[str, Any]]:
    pct = _share_pct(facts, "Communication")
    if pct is None or pct <= COMMUNICATION_THRESHOLD_PCT:
        return None
    severity = _grade(pct, 20.0, 35.0)
    return _item(
        "communication", severity, "Communication takes a large share of the step",
        f"{pct:.1f}% of the step time is spent in communication: {severity.upper()} (flagged "
        f"above {COMMUNICATION_THRESHOLD_PCT:g}%). Try gradient compression (DDP communication "
        "hooks), gradient accumulation or a larger batch size. Gradient accumulation increases "
        "the global effective batch size, which may hurt convergence; if it does, consider the "
        "LAMB optimizer.",
        "Overview", pct, "%",
        (("Gradient compression (DDP communication hooks)", URL_COMM_HOOKS),
         ("LAMB optimizer", URL_LAMB)))


def rule_low_utilization(facts: Facts) -> Optional[dict[str, Any]]:
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
        f"{LOW_UTILIZATION_PCT:g}% of the step time with a kernel running). Increase the batch "
        "size to give the GPU more work per step (this may affect convergence), and check the "
        "step breakdown for what the GPU waits on.",
        "Overview", worst, "%")


def rule_mixed_precision(facts: Facts) -> Optional[dict[str, Any]]:
    ratio = facts.tc_eligible_ops_kernel_ratio
    if ratio is None or facts.kernel_tc_ratio is None:
        return None
    if facts.kernel_tc_ratio != 0.0 or ratio <= 0.0:
        return None
    devices = facts.used_devices or sorted(facts.device_props)[:1]
    if not any(_capability(facts.device_props.get(d, {})) >= (7, 0) for d in devices):
        return None
    pct = 100.0 * ratio
    severity = _grade(pct, 20.0, 50.0)
    return _item(
        "mixed_precision", severity, "Enable mixed precision to use Tensor Cores",
        f"Kernels with {pct:.0f}% of the kernel time are launched by Tensor Cores eligible "
        f"operators, yet no kernel uses Tensor Cores: {severity.upper()}. Enable Automatic Mixed "
        "Precision (torch.autocast) to run them on Tensor Cores.",
        "Operator", pct, "%", (("Automatic Mixed Precision", URL_AMP),))


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


def _capability(props: dict[str, Any]) -> tuple[int, int]:
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if not isinstance(major, int):
        return (-1, -1)
    return (major, minor if isinstance(minor, int) else 0)


RULES: tuple[Callable[[Facts], Optional[dict[str, Any]]], ...] = (
    rule_dataloader, rule_data_parallel, rule_nccl, rule_communication, rule_low_utilization,
    rule_mixed_precision, rule_memory,
)


def recommend(facts: Facts) -> list[dict[str, Any]]:
    """Items of every rule that fires, most severe first (rule order breaks ties)."""
    items = [item for rule in RULES if (item := rule(facts)) is not None]
    return sorted(items, key=lambda item: _SEVERITY_ORDER[item["severity"]])
