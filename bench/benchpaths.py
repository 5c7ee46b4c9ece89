"""Where the benchmark keeps things, and tiny helpers shared by the parent-side modules.

Everything large (traces, the old plugin's venv, raw results) lives under ``bench/_work/``, which
is gitignored; only ``bench/results.md`` is meant to be committed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work"
TRACES = WORK / "traces"
OLDVENV = WORK / "oldvenv"
TMP = WORK / "tmp"
RESULTS_MD = BENCH / "results.md"
RESULTS_JSON = WORK / "results.json"

# The interpreter running the harness is the project's dev venv; it has torch (for recording)
# and the project's dependencies (for measuring ours).
MAIN_PYTHON = Path(sys.executable)
OLD_PYTHON = OLDVENV / "bin" / "python"

MIB = 1024 * 1024
TRACE_SUFFIX = ".pt.trace.json"

_T0 = time.monotonic()


def log(message: str) -> None:
    """Progress line with elapsed time; the full run takes many minutes, so show it is alive."""
    elapsed = time.monotonic() - _T0
    print(f"[{elapsed:7.1f}s] {message}", flush=True)


def write_json(path: Path, data: Any) -> None:
    """Write atomically so an interrupted run never leaves a truncated metadata file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file, or None when it does not exist (first run)."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
