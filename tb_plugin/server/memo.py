"""In-memory caches for the server process: a byte-bounded LRU and single-flight computation."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from concurrent.futures import Future
from typing import Any, Callable, Generic, Optional, TypeVar

V = TypeVar("V")


class MemoryLRU(Generic[V]):
    """Thread-safe LRU bounded by the (estimated) bytes of its values.

    The newest entry is always kept even when it alone exceeds the budget: a table bigger than
    the budget must still be usable by the request that loaded it.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget = max(0, int(budget_bytes))
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Optional[V]:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def peek(self, key: Hashable) -> Optional[V]:
        """The value without making it the most recently used."""
        with self._lock:
            item = self._items.get(key)
            return None if item is None else item[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, max(0, int(size)))
            self._bytes += max(0, int(size))
            while self._bytes > self.budget and len(self._items) > 1:
                _, (_, evicted) = self._items.popitem(last=False)
                self._bytes -= evicted

    def discard(self, key: Hashable) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


class SingleFlight:
    """Run `compute` once per key at a time: concurrent callers share the first one's result.

    Fifty requests for the same overview of a just-loaded worker must not analyse it 50 times.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[Hashable, Future] = {}
        self._waiting: dict[Hashable, int] = {}

    def do(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            future = self._calls.get(key)
            owner = future is None
            if owner:
                future = self._calls[key] = Future()
            else:
                self._waiting[key] = self._waiting.get(key, 0) + 1
        if not owner:
            try:
                return future.result()
            finally:
                with self._lock:
                    self._waiting[key] -= 1
                    if not self._waiting[key]:
                        del self._waiting[key]
        try:
            value = compute()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        else:
            future.set_result(value)
            return value
        finally:
            with self._lock:
                self._calls.pop(key, None)

    def waiting(self, key: Hashable) -> int:
        """How many callers wait for the run of `key` under way (an observable for tests)."""
        with self._lock:
            return self._waiting.get(key, 0)
