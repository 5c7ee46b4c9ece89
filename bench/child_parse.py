"""In-process parse throughput of one trace, and the machine's limit on the same bytes.

Usage: ``python child_parse.py TRACE PROCESSES``. Prints one JSON line:
- ``parse_s``: `load_trace(path, use_cache=False, processes=PROCESSES)` (what the CLI and the
  Python API do; PROCESSES=1 is the sequential parse);
- ``read_s``: reading the file's bytes (from the page cache after the parse);
- ``limit_s``: a C JSON decoder's pass over the same bytes: msgspec validating every byte and
  decoding each event into an empty Struct (every field skipped in C, one small object per
  event). Our parse does that much and more (typed fields, columns, interning), so this is the
  floor a one-core Python parser cannot go below;
- ``generic_s``: msgspec decoding the document into Python dicts and lists (what a naive
  loader pays; only for files up to 256 MB, it needs ~10x the file in memory).
"""

from __future__ import annotations

import sys
import time

import msgspec
from childutil import emit

from tb_plugin.load import load_trace


class _Skip(msgspec.Struct):
    pass


class _Doc(msgspec.Struct):
    traceEvents: list[_Skip]  # noqa: N815 (the JSON key)


def main() -> None:
    path, processes = sys.argv[1], int(sys.argv[2])
    start = time.perf_counter()
    table = load_trace(path, use_cache=False, processes=processes)
    parse_s = time.perf_counter() - start
    events = len(table.events)
    del table
    start = time.perf_counter()
    with open(path, "rb") as handle:
        data = handle.read()
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    skipped = msgspec.json.decode(data, type=_Doc)
    limit_s = time.perf_counter() - start
    assert len(skipped.traceEvents) >= events
    del skipped
    generic_s = None
    if len(data) <= 256 << 20:
        start = time.perf_counter()
        msgspec.json.decode(data)
        generic_s = round(time.perf_counter() - start, 3)
    mb = len(data) / (1 << 20)
    emit({"status": "ok", "mb": round(mb, 1), "processes": processes, "events": events,
          "parse_s": round(parse_s, 3), "read_s": round(read_s, 3),
          "limit_s": round(limit_s, 3), "generic_s": generic_s,
          "parse_mb_s": round(mb / parse_s, 1), "limit_mb_s": round(mb / limit_s, 1)})


if __name__ == "__main__":
    main()
