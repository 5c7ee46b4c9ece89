"""Read a `export_memory_timeline` raw export (`*.raw.json.gz`) into int64 arrays.

The export is a JSON list of `[ts_ns, action, bytes, category]` records written by
`torch.profiler._memory_profiler.MemoryProfileTimeline.export_memory_timeline_raw`:
- action: `_ACTION_TO_INDEX` = Action enum values PREEXISTING=1, CREATE=2, INCREMENT_VERSION=3,
  DESTROY=4; the sign of `bytes` is already applied (DESTROY and the old version's half of
  INCREMENT_VERSION are negative);
- category: `_CATEGORY_TO_INDEX` = position in `_CATEGORY_TO_COLORS`: PARAMETER, OPTIMIZER_STATE,
  INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, then None (UNKNOWN);
- ts -1 marks memory that existed before profiling.

The file is streamed: records are matched in decompressed chunks with one regex per chunk and
converted to int64 arrays, so at most one chunk's records exist as Python objects. Records that
are not four integers, or carry an unknown action or category, are skipped and counted. The
result is cached like a parsed table (see `tb_plugin.load.load_memory_export`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Union

import numpy as np

from ..storage import FileRef, iter_decompressed, open_ref, open_to_serve

#: Bumped whenever the reader's output changes; part of the export's cache key.
EXPORT_VERSION = 1
_MAX_RECORD = 1 << 20  # a record is `[ts, action, bytes, category]`: tens of bytes

ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}
PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY = 1, 2, 3, 4
CATEGORIES = ("PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT",
              "AUTOGRAD_DETAIL", "UNKNOWN")

_RECORD = re.compile(rb"\[\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
#: Every innermost non-empty list, well-formed or not (the outer list encloses brackets, so it
#: never matches).
_ANY_RECORD = re.compile(rb"\[[^\[\]]*[^\[\]\s][^\[\]]*\]")


@dataclass
class RawTimeline:
    """Records in file order: ts in ns (-1 = pre-existing), action code, signed bytes, category
    index into CATEGORIES."""

    ts_ns: np.ndarray
    action: np.ndarray
    bytes: np.ndarray
    category: np.ndarray
    skipped: int = 0
    messages: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts_ns)


Source = Union[FileRef, str, Path, BinaryIO]


def read_raw_timeline(source: Source) -> RawTimeline:
    """Stream a raw export (gzipped or plain) from a FileRef, a path or an open binary file."""
    if isinstance(source, (str, Path)):
        source = open_ref(str(source))  # a regular file only: a FIFO is never opened
    if isinstance(source, FileRef):
        with open_to_serve(source) as handle:  # inside the logdir as it is now, if found there
            return _read(handle)
    return _read(source)


def _read(handle: BinaryIO) -> RawTimeline:
    parts: list[np.ndarray] = []
    skipped, tail = 0, b""
    truncated: list[str] = []
    for chunk in iter_decompressed(handle, on_truncated_gzip=lambda why, _: truncated.append(why)):
        if len(tail) > _MAX_RECORD:  # no record ends: one huge token, not an export's record
            truncated.append("a record longer than 1 MB (a record is four integers): the rest "
                             "of the file is not a memory-timeline export and was skipped")
            tail = b""
            break
        buffer = tail + chunk
        cut = buffer.rfind(b"]") + 1  # records never nest: this ends a complete record
        records, bad = _parse(buffer[:cut])
        parts.append(records)
        skipped += bad
        tail = buffer[cut:]
    skipped += int(b"[" in tail)  # a record cut off by the end of the file
    data = np.concatenate(parts) if parts else np.empty((0, 4), dtype=np.int64)
    return _validated(data, skipped, truncated)


def _parse(body: bytes) -> tuple[np.ndarray, int]:
    """The four-integer records of a chunk as an (n, 4) int64 array, and how many others."""
    found = _RECORD.findall(body)
    total = len(_ANY_RECORD.findall(body))
    if not found:
        return np.empty((0, 4), dtype=np.int64), total
    return np.array(found, dtype=np.bytes_).astype(np.int64), total - len(found)


def _validated(data: np.ndarray, skipped: int, truncated: list[str]) -> RawTimeline:
    ok = np.isin(data[:, 1], list(ACTIONS)) & (data[:, 3] >= 0) & (data[:, 3] < len(CATEGORIES))
    skipped += int((~ok).sum())
    data = data[ok]
    messages = []
    if skipped:
        messages.append(f"Skipped {skipped} malformed memory-timeline record(s): each record "
                        "must be [ts_ns, action 1-4, bytes, category 0-7].")
    if truncated:
        messages.append(f"The memory-timeline file is truncated ({truncated[0]}); the records "
                        "before the cut are shown.")
    return RawTimeline(data[:, 0], data[:, 1], data[:, 2], data[:, 3], skipped, messages)
