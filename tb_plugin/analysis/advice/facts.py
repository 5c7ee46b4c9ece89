"""The facts the recommendation rules read (`Facts`), and the item and pricing helpers they
share (`analysis.advice.recommendations` holds the rules)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

HIGH, MEDIUM, LOW = "high", "medium", "low"
SEVERITY_ORDER = {HIGH: 0, MEDIUM: 1, LOW: 2}

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
    # pricing (advice_costs): device idle time within the steps, summed over the steps (us)
    step_count: int = 0
    idle_us: float = 0.0  # the priced device's idle gaps
    host_wait_us: float = 0.0  # gaps the CPU left (nothing queued)
    launch_idle_us: float = 0.0  # the launch-call part of those gaps
    sync_idle_us: float = 0.0  # device idle from a sync's start to the next device event
    stalled_us: float = 0.0  # device idle with its work queued (costs.STALL_MIN_US)
    stall_range: Range = None  # the longest stall
    host_compute_us: float = 0.0  # host-only work (launches nothing) while no device runs
    graph_mode: str = "none"  # "none" | "replay" | "capture" (CUDA/HIP graphs)
    kernel_capability: Optional[tuple[int, int]] = None  # architecture named by kernel names
    step_bounds: list[tuple[str, float, float]] = field(default_factory=list)  # name, start, end
    variance: Optional[dict[str, Any]] = None  # analysis.variance.steps.step_variance


def make_item(rule: str, severity: str, title: str, text: str, view: str, metric: float, unit: str,
          links: tuple[tuple[str, str], ...] = (), where: Range = None,
          saving: Optional[tuple[float, float]] = None) -> dict[str, Any]:
    """`saving`: (us per step, % of the step time) the fix would save, None when unpriced."""
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
        "saving_us": round(float(saving[0]), 2) if saving else None,
        "saving_pct": round(float(saving[1]), 2) if saving else None,
    }


def steps_saving(facts: Facts, total_us: float) -> Optional[tuple[float, float]]:
    """A saving summed over the profiled steps as (us per step, % of the step time)."""
    if facts.steps_us <= 0:
        return None
    steps = max(facts.step_count, 1)
    return total_us / steps, 100.0 * total_us / facts.steps_us


def share_saving(facts: Facts, category: str) -> Optional[tuple[float, float]]:
    """The saving of removing a breakdown category's exposed time (its average per step)."""
    total = facts.average.get("Total", 0.0)
    us = facts.average.get(category, 0.0)
    return (us, 100.0 * us / total) if total > 0 else None


def pct_saving(facts: Facts, pct: float) -> Optional[tuple[float, float]]:
    """The saving of a share (%) of the average step."""
    total = facts.average.get("Total", 0.0)
    return (total * pct / 100.0, pct) if total > 0 else None


def graphs_hint(facts: Facts) -> str:
    """The CUDA/HIP graphs suggestion, or nothing when the trace already uses graphs."""
    return "" if facts.graph_mode != "none" else ", capture the step with CUDA/HIP graphs"


def grade(value: float, medium: float, high: float) -> str:
    """Severity of a value that is worse when larger."""
    return HIGH if value >= high else MEDIUM if value >= medium else LOW


def share_pct(facts: Facts, category: str) -> Optional[float]:
    total = facts.average.get("Total", 0.0)
    return 100.0 * facts.average.get(category, 0.0) / total if total > 0 else None


def join_words(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def fmt_time(us: float) -> str:
    return f"{us / 1e6:.1f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms" if us >= 1e3 else \
        f"{us:.0f} us"


def api_name(facts: Facts) -> str:
    return {"amd": "HIP", "nvidia": "CUDA"}.get(facts.vendor, "GPU runtime")
