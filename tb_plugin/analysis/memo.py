"""Derived analyses (op tree, steps, view frames...) computed once per table.

Each stage allocates and frees tens of MB of numpy temporaries; glibc keeps freed pages in the
process, so the first computation of a stage is followed by a heap trim (`heap`) and the
resident size stays close to what is alive. The table itself only stores the values.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ..heap import release_free_memory
from ..ingest.schema import TraceTable

T = TypeVar("T")


def memoised(table: TraceTable, key: str, compute: Callable[[], T]) -> T:
    """`table.memo(key, compute)`, giving the stage's freed temporaries back to the OS after
    the first computation."""
    if key in table.derived:
        return table.derived[key]
    value = table.memo(key, compute)
    release_free_memory()
    return value
