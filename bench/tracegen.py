"""Produce (or reuse) one real recorded trace per requested size.

Sizes are reached by recording more training steps, never by padding: a short calibration run
gives bytes per step, then each size gets ``target / bytes_per_step`` active steps. Recording
takes minutes at 800 MB, so finished traces are reused; a trace is only considered finished once
its run folder has been renamed from ``<size>mb.partial`` to ``<size>mb`` and its metadata
(bytes, event count) written next to it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from benchpaths import BENCH, MAIN_PYTHON, MIB, TRACE_SUFFIX, TRACES, log, read_json, write_json
from record import WORKLOAD

CALIBRATION_STEPS = 8
_SCAN_CHUNK = 16 * MIB


@dataclass
class TraceInfo:
    """One trace file and the facts the report needs about it."""

    size_label: str  # e.g. "200mb": the requested size, also the run folder name
    path: str
    bytes: int
    events: int  # number of trace events ("ph" keys) in the JSON
    steps: int  # recorded profiler steps (for a synthesized trace: of all copies)
    synthetic: bool = False
    workload: str = WORKLOAD

    @property
    def mb(self) -> float:
        """File size in MiB, the unit every size and RSS number in the report uses."""
        return self.bytes / MIB


def count_events(path: Path) -> int:
    """Count trace events by scanning for ``"ph":`` keys in chunks.

    A streaming byte scan keeps this cheap (seconds, a few MB of RAM) even at 4 GB, where
    ``json.load`` would need many GB and minutes. Every Chrome-trace event has exactly one
    ``ph`` key and Kineto never emits that byte sequence inside strings.
    """
    needle = b'"ph":'
    overlap = len(needle) - 1
    total = 0
    tail = b""
    with path.open("rb") as fh:
        while chunk := fh.read(_SCAN_CHUNK):
            window = tail + chunk
            total += window.count(needle)
            tail = window[-overlap:]
    return total


def _meta_path(label: str) -> Path:
    return TRACES / f"{label}.json"


def _single_trace(folder: Path) -> Path | None:
    """The run folder's only trace file; None when absent or ambiguous."""
    found = sorted(folder.glob(f"*{TRACE_SUFFIX}")) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None


def _run_recorder(out_dir: Path, steps: int, mem_cap_gb: float) -> dict:
    """Record in a child process so torch's multi-GB event buffers die with it."""
    cmd = [
        str(MAIN_PYTHON),
        str(BENCH / "record.py"),
        "--out",
        str(out_dir),
        "--steps",
        str(steps),
        "--mem-cap-gb",
        str(mem_cap_gb),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"recording failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_existing(label: str) -> TraceInfo | None:
    """Reuse a finished trace when its metadata still matches the file on disk."""
    meta = read_json(_meta_path(label))
    path = _single_trace(TRACES / label)
    if meta is None or path is None:
        return None
    if meta.get("path") != str(path) or meta.get("bytes") != path.stat().st_size:
        return None
    if meta.get("workload") != WORKLOAD:
        log(f"{label}: recorded with another workload ({meta.get('workload')}); re-recording")
        return None
    return TraceInfo(**meta)


def finish_trace(label: str, folder: Path, steps: int, synthetic: bool = False) -> TraceInfo:
    """Count events, write metadata, and return the info for a freshly made trace."""
    path = _single_trace(folder)
    if path is None:
        raise RuntimeError(f"no single trace file in {folder}")
    info = TraceInfo(label, str(path), path.stat().st_size, count_events(path), steps, synthetic)
    write_json(_meta_path(label), asdict(info))
    return info


def bytes_per_step(mem_cap_gb: float) -> float:
    """Measure JSON bytes per recorded training step with a short run (cached)."""
    cached = load_existing("calibration")
    if cached is None:
        log(f"calibrating: recording {CALIBRATION_STEPS} steps")
        cached = _record_into("calibration", CALIBRATION_STEPS, mem_cap_gb)
    return cached.bytes / cached.steps


def _record_into(label: str, steps: int, mem_cap_gb: float) -> TraceInfo:
    """Record into ``<label>.partial`` and rename on success, so half-written runs never count."""
    final = TRACES / label
    partial = TRACES / f"{label}.partial"
    for stale in (partial, final):
        shutil.rmtree(stale, ignore_errors=True)
    summary = _run_recorder(partial, steps, mem_cap_gb)
    partial.rename(final)
    log(
        f"recorded {label}: {summary['bytes'] / MIB:.0f} MB in {summary['seconds']} s "
        f"(recorder peak RSS {summary['peak_rss_mb']:.0f} MB)"
    )
    return finish_trace(label, final, steps)


def ensure_trace(size_mb: int, mem_cap_gb: float) -> TraceInfo:
    """Return a recorded trace of about ``size_mb`` MiB, recording it only if needed."""
    label = f"{size_mb}mb"
    existing = load_existing(label)
    if existing is not None:
        log(f"reusing {label}: {existing.mb:.0f} MB, {existing.events:,} events")
        return existing
    steps = max(1, round(size_mb * MIB / bytes_per_step(mem_cap_gb)))
    log(f"recording {label}: {steps} steps (torch needs RAM ~9.5x the JSON while recording)")
    info = _record_into(label, steps, mem_cap_gb)
    log(f"{label}: {info.mb:.0f} MB, {info.events:,} events")
    return info
