"""Give freed heap memory back to the operating system.

glibc keeps freed heap pages (and, after its mmap threshold has adapted upwards, freed large
arrays) in the process instead of returning them, so RSS stays at the high-water mark of every
temporary. Parsing and analysis free tens of MB of numpy temporaries per stage; trimming after
each stage keeps the resident size close to what is alive.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Optional


def release_free_memory() -> None:
    """Return free heap pages to the OS (glibc `malloc_trim`; a no-op elsewhere). ~1 ms."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _load_malloc_trim() -> Optional[Callable[[int], int]]:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl...): nothing to do
        return None


_malloc_trim = _load_malloc_trim()
