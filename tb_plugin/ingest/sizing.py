"""The one estimate of what parsing a file costs, for every scheduler of parser processes (the
server's load pool, the CLI's batch of ranks, the split of one file across processes).

- `json_size`: the bytes of JSON in a file: its size, or for a local gzip file the size its
  trailer states (`compression.trailer_size`), None when that cannot be trusted or read.
- `peak_memory`: a parser process's peak: `PARSER_MEMORY` (the interpreter, numpy, pandas)
  plus the JSON size (measured in bench/: peak RSS is 0.5-1.0x the JSON beyond the
  interpreter). Without a trusted trailer (remote, unreadable, past 4 GiB) a gzip file counts
  `GZIP_EXPANSION` times its size; either way a gzip file's JSON is capped by the inflation
  limit the parser enforces (`max(INFLATE_FLOOR, max_inflate_ratio x size)`).
"""

from __future__ import annotations

from typing import Optional

from ..compression import GZIP_MAGIC, trailer_size
from ..settings import INFLATE_FLOOR
from ..storage import FileRef, is_local, open_file

#: A parser process's memory beyond the JSON it reads.
PARSER_MEMORY = 192 << 20
#: gzip traces inflate 10-30x; the estimate when the trailer cannot be read.
GZIP_EXPANSION = 20


def is_gzip_name(path: str) -> bool:
    return path.endswith(".gz")


def json_size(ref: FileRef) -> Optional[int]:
    """Bytes of JSON in `ref`: its size for a plain file; for a local gzip file (by its magic)
    the trailer's ISIZE when trusted; None for a remote gzip file or one not read."""
    if not is_local(ref.fs):
        return None if is_gzip_name(ref.path) else ref.size
    try:
        with open_file(ref.fs, ref.path) as handle:
            if handle.read(2) != GZIP_MAGIC:
                return ref.size
            return trailer_size(handle, ref.size)
    except OSError:
        return None


def peak_memory(ref: FileRef, max_inflate_ratio: float) -> int:
    """A parser process's peak memory for `ref` (see the module docstring)."""
    if not is_gzip_name(ref.path):
        return PARSER_MEMORY + ref.size
    inflated = json_size(ref)
    if inflated is None:
        inflated = ref.size * GZIP_EXPANSION
    limit = max(INFLATE_FLOOR, max_inflate_ratio * ref.size)
    return PARSER_MEMORY + int(min(inflated, limit))
