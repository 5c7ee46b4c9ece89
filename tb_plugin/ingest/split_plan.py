"""How many processes parse one file, and where each child starts (see parallel.py)."""

from __future__ import annotations

import os
from typing import Optional

from fsspec.implementations.local import LocalFileSystem

from ..compression import GZIP_MAGIC, trailer_size
from ..settings import available_memory, usable_cpus
from ..storage import FileRef, open_file
from .split_child import SplitPlan

#: Below this uncompressed size a second process costs more than it saves; every part is at
#: least half of it.
SPLIT_MIN_BYTES = 64 << 20
#: Memory a forked child needs beyond its share of the columns (its heap, batch buffers; the
#: interpreter's pages are shared with the parent). Bounds N by the available memory.
PROCESS_MEMORY = 64 << 20


def wanted_processes(processes: Optional[int], configured: Optional[int] = None) -> int:
    """The `processes` argument, else `configured` (`Settings.parse_processes`,
    $TORCH_PROF_PARSE_PROCESSES, passed by `loader.parse_trace`), else the usable cores. An
    explicit number is taken as asked, even beyond the cores (tests, benchmarks)."""
    if processes is not None:
        return processes
    return configured or usable_cpus()


def split_count(size: int, processes: Optional[int] = None, min_bytes: Optional[int] = None,
                memory: Optional[int] = None, configured: Optional[int] = None) -> int:
    """Processes for `size` bytes of JSON: as wanted, with parts of at least half of
    `min_bytes`, and `PROCESS_MEMORY` per extra process beside the columns (~size) in `memory`
    (default: what is available now)."""
    threshold = SPLIT_MIN_BYTES if min_bytes is None else max(min_bytes, 1)
    if size < threshold:
        return 1
    count = min(wanted_processes(processes, configured), size // max(1, threshold // 2))
    memory = available_memory() if memory is None else memory
    if memory is not None:
        count = min(count, 1 + max(0, memory - size) // PROCESS_MEMORY)
    return max(1, count)


def plan_split(ref: FileRef, processes: Optional[int] = None, min_bytes: Optional[int] = None,
               configured: Optional[int] = None) -> Optional[list[SplitPlan]]:
    """The children's plans for `ref` (N-1 of them), or None to parse it in this process;
    `configured` as `wanted_processes` takes it."""
    if wanted_processes(processes, configured) < 2:
        return None
    # Remote files stay sequential: each child would download part of the file a second time.
    if not isinstance(ref.fs, LocalFileSystem):
        return None
    sized = uncompressed_size(ref.path)
    if sized is None:
        return None
    size, gzipped = sized
    count = split_count(size, processes, min_bytes, configured=configured)
    if count < 2:
        return None
    mids = [size * k // count for k in range(1, count)]
    return [SplitPlan(ref.path, gzipped, mid, mids[i + 1] if i + 1 < len(mids) else None)
            for i, mid in enumerate(mids)]


def uncompressed_size(path: str) -> Optional[tuple[int, bool]]:
    """(bytes of JSON, is gzip); for gzip from its trailer, when that can be trusted
    (`compression.trailer_size`: a wrong size would only unbalance the parts, but then we do
    not know it is big enough to be worth a process). None for anything but a regular file
    (a FIFO is never opened for reading: it may never end)."""
    try:
        with open_file(LocalFileSystem(), path) as handle:
            magic = handle.read(2)
            size = os.fstat(handle.fileno()).st_size
            if magic != GZIP_MAGIC:
                return size, False
            isize = trailer_size(handle, size)
    except OSError:
        return None
    return None if isize is None else (isize, True)
