"""Measure the deprecated torch-tb-profiler 0.4.3 on one trace (run with the old venv's python).

This is exactly what its ``RunLoader._process_data`` does for each trace file, minus the
``multiprocessing.Process`` it spawns per file and the queue back to TensorBoard:

    data = RunProfileData.parse(worker, span, path, cache_dir)  # json + process() + analyze()
    profile = RunGenerator(worker, span, data).generate_run_profile()
    DistributedRunProfileData(data)

``RunProfileData.parse`` already calls ``process()`` and ``analyze()`` (via ``from_json``), so
nothing is called twice. Usage: ``python child_old.py TRACE CACHE_DIR``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from childutil import emit, rss_mb, timed

# The plugin logs at INFO by default; keep stderr small for multi-GB traces.
os.environ.setdefault("TORCH_PROFILER_LOG_LEVEL", "WARNING")

from torch_tb_profiler import __version__, consts  # noqa: E402 - after the log level is set
from torch_tb_profiler.profiler.data import (  # noqa: E402
    DistributedRunProfileData,
    RunProfileData,
)
from torch_tb_profiler.profiler.event_parser import ProfileRole  # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator  # noqa: E402


def worker_and_span(path: str) -> tuple[str, int | None]:
    """Worker name and span index, derived from the file name the way the loader does."""
    match = consts.WORKER_PATTERN.match(os.path.basename(path))
    if match is None:
        raise ValueError(f"{path} is not named <worker>[.<span>].pt.trace.json")
    return match.group(1), (1 if match.group(2) else None)


def load(path: str, cache_dir: str) -> dict[str, Any]:
    """The old plugin's per-file pipeline; returns a few facts to sanity-check its output."""
    worker, span = worker_and_span(path)
    data = RunProfileData.parse(worker, span, path, cache_dir)
    profile = RunGenerator(worker, span, data).generate_run_profile()
    DistributedRunProfileData(data)
    return {
        "parsed_events": len(data.events),
        "steps": len(data.steps_names or []),
        "operators": len(data.op_list_groupby_name or []),
        "views": [view.name for view in profile.views],
        "dataloader_us": round(float(data.avg_costs.costs[ProfileRole.DataLoader]), 1),
        "plugin_version": __version__,
    }


def main() -> None:
    """Entry point: measure one file and print the JSON result line."""
    path, cache_dir = sys.argv[1], sys.argv[2]
    emit(timed(lambda: load(path, cache_dir), rss_mb()))


if __name__ == "__main__":
    main()
