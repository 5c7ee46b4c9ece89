"""One measurement of bench/parse_bench.py, in a fresh process: a parse, or the skip-scan.

    python parse_child.py parse TRACE PROCESSES   # our parse (load_trace, no cache)
    python parse_child.py skip TRACE              # msgspec over the JSON, every field skipped

Prints one JSON line: wall seconds, CPU seconds of this process and of its children (the split
parse's), the JSON's MB (decompressed), events, the load average before and after. The
skip-scan is timed on the decompressed bytes already in memory (reading and gunzipping are
not in it): it is the floor a one-core parser of these bytes cannot go below.
"""

from __future__ import annotations

import os
import resource
import sys
import time

import msgspec
from childutil import emit

from tb_plugin.load import load_trace
from tb_plugin.storage import iter_decompressed, open_ref


class _Skip(msgspec.Struct):
    pass


class _Doc(msgspec.Struct):
    traceEvents: list[_Skip]  # noqa: N815 (the JSON key)


def _cpu() -> tuple[float, float]:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (mine.ru_utime + mine.ru_stime, children.ru_utime + children.ru_stime)


def _json_bytes(path: str) -> bytes:
    with open_ref(path).open() as handle:
        return b"".join(iter_decompressed(handle))


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    load_before = os.getloadavg()[0]
    if mode == "skip":
        data = _json_bytes(path)
        cpu0, start = _cpu(), time.perf_counter()
        events = len(msgspec.json.decode(data, type=_Doc).traceEvents)
        size = len(data)
    else:
        processes = int(sys.argv[3])
        cpu0, start = _cpu(), time.perf_counter()
        table = load_trace(path, use_cache=False, processes=processes)
        events = table.event_count
        size = table.status.bytes_read
    wall = time.perf_counter() - start
    cpu1 = _cpu()
    emit({"status": "ok", "mode": mode, "mb": round(size / 1e6, 1), "events": events,
          "wall_s": round(wall, 3), "cpu_s": round(cpu1[0] - cpu0[0], 3),
          "children_cpu_s": round(cpu1[1] - cpu0[1], 3),
          "load_before": load_before, "load_after": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
