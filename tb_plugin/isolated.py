"""Run one call in a fresh worker process whose address space is capped, so that whatever the
call allocates on a file's say is never hosted by the caller (TensorBoard, the CLI, a notebook).

`call_isolated(fn, *args, memory_bytes=...)` starts one `workers.WorkerPool` process (it imports
only the worker loop and the module of `fn`), caps its address space (`RLIMIT_AS`) before the
call, runs `fn`, returns its result or raises its exception, and ends the process. A call that
runs out of memory raises `MemoryError` in the child (or the child dies): either way the caller
gets `IsolatedFailure` naming the limit, and keeps running; one past its deadline is killed
(`IsolatedTimeout`). The calling thread only waits (no
GIL held), so a server answers other requests meanwhile.

The process is started by the calling thread and dies with it (children.py), and is ended when
the call returns: nothing is left running.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Optional

from .workers import WorkerDied, WorkerPool

try:
    import resource
except ImportError:  # Windows: no rlimits; the call still runs in its own process
    resource = None  # type: ignore[assignment]


class IsolatedFailure(RuntimeError):
    """The isolated call ran out of its memory, or its process could not start or died."""


class IsolatedTimeout(IsolatedFailure):
    """The isolated call took longer than its deadline (its process was killed)."""


def limit_memory(memory_bytes: int) -> None:
    """Cap this process's address space (the worker's initializer)."""
    if resource is not None and memory_bytes > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def call_isolated(fn: Callable[..., Any], *args: Any, memory_bytes: int,
                  timeout_s: Optional[float] = None, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a fresh process of at most `memory_bytes` of address space,
    killed (`IsolatedTimeout`) when it has not answered `timeout_s` seconds after the call."""
    pool = WorkerPool(1, initializer=limit_memory, initargs=(memory_bytes,))
    try:
        return pool.submit(_guarded, fn, args, kwargs, memory_bytes).result(timeout_s)
    except FutureTimeout:
        pool.kill()
        raise IsolatedTimeout(f"it took longer than {timeout_s:g} s to read") from None
    except WorkerDied as exc:
        raise IsolatedFailure(f"its reader process ended ({exc}); it may need more than the "
                              f"{memory_bytes >> 20} MiB of memory it may use") from None
    finally:
        pool.shutdown(wait=True)
        pool.kill()


def _guarded(fn: Callable[..., Any], args: tuple, kwargs: dict, memory_bytes: int) -> Any:
    """In the worker: `fn`'s result, or `IsolatedFailure` when it runs out of memory, raised
    once the frames holding that memory are gone (reporting it needs memory too)."""
    try:
        return fn(*args, **kwargs)
    except MemoryError:
        pass
    raise IsolatedFailure(f"it needs more than the {memory_bytes >> 20} MiB of memory its "
                          "reader may use")
