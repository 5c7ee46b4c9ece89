"""Reading allocator snapshots: CPython's unpickler against the plain-data reader
(`tb_plugin.ingest.plain_pickle`), the whole read into columns, and the read in its capped
process as the server, CLI and API do it (process start included).

    python bench/snapshot_read.py [--repeat 3] > bench/snapshot_results.md

Uses the real snapshots under ../shared/traces/cs336_cuda_snapshots; medians of `--repeat`.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from tb_plugin.ingest.plain_pickle import read_plain
from tb_plugin.ingest.snapshot import read_snapshot
from tb_plugin.load import read_snapshot_isolated
from tb_plugin.storage import open_ref

SNAPSHOTS = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / \
    "cs336_cuda_snapshots"


def median_s(fn: Callable[..., Any], arg: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| snapshot | MB | pickle.loads s | read_plain s | read_snapshot s | "
          "isolated s |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in sorted(SNAPSHOTS.glob("*.pickle")):
        data = path.read_bytes()
        row = [median_s(pickle.loads, data, args.repeat),
               median_s(read_plain, data, args.repeat),
               median_s(read_snapshot, path, args.repeat),
               median_s(read_snapshot_isolated, open_ref(str(path)), args.repeat)]
        print(f"| {path.name} | {len(data) / 1e6:.1f} | "
              + " | ".join(f"{t:.3f}" for t in row) + " |")


if __name__ == "__main__":
    main()
