"""The device-stall rule: the device had work queued and did not run it (`costs.STALL_MIN_US`).

Fires when the stalled time is at least `STALL_PCT` (inclusive) of the step time. A stall is
not the host's doing (the launch call had returned) nor the batch size's: it names the cause
outside the trace, and the host-bound and low-utilisation advice stay silent about it (host
wait excludes it; this rule is one of the idle causes that silence low utilisation).
"""

from __future__ import annotations

from typing import Any, Optional

from .costs import STALL_MIN_US
from .facts import Facts, fmt_time, grade, make_item, steps_saving

STALL_PCT = 10.0


def rule_device_stall(facts: Facts) -> Optional[dict[str, Any]]:
    saving = steps_saving(facts, facts.stalled_us)
    if facts.graph_mode == "capture" or saving is None or saving[1] < STALL_PCT:
        return None
    longest = facts.stall_range
    longest_text = f" (the longest: {fmt_time(longest[1] - longest[0])})" if longest else ""
    return make_item(
        "device_stalled", grade(saving[1], 25.0, 50.0), "The GPU held queued work",
        f"For {fmt_time(saving[0])} per step ({saving[1]:.1f}% of the step) the GPU had work "
        f"queued (its launch call had returned more than {fmt_time(STALL_MIN_US)} earlier) and "
        f"ran nothing{longest_text}. Neither the host nor the batch size explains this time: "
        "something this trace does not show held the GPU (another process on the same GPU, a "
        "lazy kernel or module load, a blocking call of another library), or the host and "
        "device clocks of the trace disagree. Check the GPU's other processes (nvidia-smi / "
        "rocm-smi) and profile past the first steps.", "Trace", saving[1], "%", (), longest,
        saving)
