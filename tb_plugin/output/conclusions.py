"""The conclusions a view's payload holds, as lines of text above its table on a terminal
(`report --format table`): the recommendations (priced ones with their saving per step), the GPU
summary and the step time (Overview), MFU and MBU per step (roofline), idle time per device and
launch statistics (GPU Idle). A view with none of these gets no lines. Numbers are the
payload's, rounded for reading (1 decimal; times in ms from 1 ms on)."""

from __future__ import annotations

from typing import Any, Optional

_GPU_FIELDS = (("utilization_pct", "utilization"), ("sm_efficiency_pct", "SM efficiency"),
               ("achieved_occupancy_pct", "occupancy"), ("tensor_core_pct", "tensor cores"),
               ("mfu_pct", "MFU"), ("mbu_pct", "MBU"))


def conclusions_text(view: str, payload: Any) -> str:
    """The lines (ending in a blank line), or "" when the payload holds no conclusion."""
    if not isinstance(payload, dict):
        return ""
    lines: list[str] = []
    if isinstance(payload.get("message"), str) and payload["message"]:
        lines.append(payload["message"])
    if view == "overview":
        lines += _overview(payload)
    elif view == "roofline":
        lines += _roofline(payload)
    elif view == "gpu_idle":
        lines += _gpu_idle(payload)
    lines += _recommendations(payload.get("recommendations"))
    return "".join(line + "\n" for line in lines) + ("\n" if lines else "")


def duration(us: Optional[float]) -> str:
    if us is None:
        return "-"
    return f"{us / 1e3:,.1f} ms" if abs(us) >= 1e3 else f"{us:,.1f} us"


def _pct(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _overview(payload: dict[str, Any]) -> list[str]:
    average = payload.get("average") or {}
    total = average.get("total_us") or 0.0
    shares = ", ".join(f"{name} {100 * us / total:.1f}%" for name, us in (
        average.get("breakdown_us") or {}).items() if us and total)
    lines = [f"Step time: {duration(total)} mean over {len(payload.get('steps') or [])} "
             f"steps ({shares or 'no breakdown'})"]
    for gpu in payload.get("gpus") or []:
        known = ", ".join(f"{label} {_pct(gpu.get(key))}" for key, label in _GPU_FIELDS
                          if gpu.get(key) is not None)
        lines.append(f"GPU {gpu.get('id')} {gpu.get('name') or ''}: {known or 'no metrics'}")
    return lines


def _roofline(payload: dict[str, Any]) -> list[str]:
    device = payload.get("device") or {}
    lines = [f"Device: {device.get('name') or '-'} (peaks: {device.get('peaks_model') or '-'})"]
    for step in payload.get("steps") or []:
        lines.append(f"Step {step.get('step')}: MFU {_pct(step.get('mfu_pct'))}, MBU "
                     f"{_pct(step.get('mbu_pct'))}, {step.get('tflops') or 0:.2f} TFLOP/s")
    return lines


def _gpu_idle(payload: dict[str, Any]) -> list[str]:
    lines = [f"GPU {d.get('device')}: idle {_pct(d.get('idle_pct'))} of "
             f"{duration(d.get('window_us'))} (compute {duration(d.get('compute_us'))}, "
             f"communication {duration(d.get('communication_us'))}, memory "
             f"{duration(d.get('memory_us'))})" for d in payload.get("temporal") or []]
    launch = payload.get("launch") or {}
    if launch.get("kernels"):
        lines.append(f"Launches: {launch['kernels']} kernels, {launch.get('short_kernels', 0)} "
                     f"shorter than their launch; delay median "
                     f"{duration(launch.get('median_delay_us'))}")
    return lines


def _recommendations(items: Any) -> list[str]:
    if not isinstance(items, list) or not items:
        return []
    lines = ["Recommendations:"]
    for i, item in enumerate(items, 1):
        saving = item.get("saving_us")
        priced = "" if saving is None else (
            f" (saves up to {duration(saving)} per step, {_pct(item.get('saving_pct'))})")
        lines.append(f"  {i}. [{item.get('severity')}] {item.get('title')}{priced}")
    return lines
