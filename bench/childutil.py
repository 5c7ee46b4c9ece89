"""Stdlib-only helpers for the measurement children (they run under two different venvs).

Peak memory is read from ``VmHWM`` in ``/proc/self/status``: the high-water RSS of this process's
own address space, which the kernel resets at ``exec``. ``ru_maxrss`` is reported too, but it is
not reset at exec (Linux carries the pre-exec, i.e. the parent's, high-water mark into it), so it
can over-report when the parent is big.
"""

from __future__ import annotations

import json
import resource
import sys
import time
import traceback
from typing import Any, Callable

_KIB = 1024.0


def _status_kib(field: str) -> float | None:
    """A ``kB`` field from /proc/self/status (Linux only), else None."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float:
    """Current resident set size in MiB (used for the post-import baseline)."""
    kib = _status_kib("VmRSS")
    return round((kib or 0.0) / _KIB, 1)


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (VmHWM; ru_maxrss where /proc is absent)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return round(kib / _KIB, 1)


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (ours may parse in 2 processes)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def emit(result: dict[str, Any]) -> None:
    """Print the result as the last stdout line; the parent parses only that line."""
    result.setdefault("peak_rss_mb", peak_rss_mb())
    # pandas >= 3 imports pyarrow at startup when it is installed (~36 MB more RSS); neither
    # plugin needs it, and both venvs should agree for the RSS columns to compare
    result["pyarrow_loaded"] = "pyarrow" in sys.modules
    result["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KIB, 1)
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)


def timed(work: Callable[[], dict[str, Any]], baseline: float) -> dict[str, Any]:
    """Run ``work`` and wrap its facts with wall and CPU time; errors become a result too.

    CPU time is kept next to wall time because the machine is shared: when other jobs compete
    for the 2 cores, wall time inflates and CPU time does not.

    An exception is reported as ``status: error`` instead of a traceback-only exit so the
    harness can still print an honest table row for the other plugin and sizes.
    """
    start, cpu_start = time.perf_counter(), cpu_seconds()
    try:
        facts = work()
    except Exception as exc:  # any failure is a benchmark result worth showing
        traceback.print_exc()
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:500]}
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_start
    return {
        "status": "ok",
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "baseline_rss_mb": baseline,
        **facts,
    }
