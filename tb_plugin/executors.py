"""Where files are parsed and summarised: one `concurrent.futures.Executor` seam.

`make_executor(config, ...)` returns the embedded local process pool (`workers.WorkerPool`:
nothing to install or start), or, when `$TORCH_PROF_CLUSTER` (the CLI's `--cluster`) names a
Ray cluster, a `RayExecutor` whose tasks run the same module-level functions on the cluster's
workers: each reads its file through fsspec, parses it, writes the table and its summary to
the (shared) cache and returns only the small summary. The parsers' progress messages reach
the same local queue either way (on Ray through a queue actor and a forwarding thread). The
server's `LoadPool` and the CLI's `summary` submit their per-file work here, so both run
locally or on the cluster alike.

Ray is an optional extra (`pip install "torch-prof[ray]"`), imported only when a cluster is
configured. An unreachable cluster is one clear error naming the address, within
`CONNECT_TIMEOUT_S`: the executor is still returned, and every task submitted to it fails at
once with that error (the server shows it on each file; the CLI exits with it).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import queue
import socket
import threading
import uuid
from concurrent.futures import Executor, Future
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from .settings import CLUSTER_ENV, Settings
from .workers import WorkerPool

log = logging.getLogger(__name__)

#: Seconds to reach the cluster's address before giving up with a clear error.
CONNECT_TIMEOUT_S = 10.0
#: A task whose Ray worker dies (killed, out of memory, node lost) is run again this many times.
TASK_RETRIES = 3
#: Tasks a `LoadPool` keeps in flight on a cluster (Ray queues them by the cluster's CPUs).
CLUSTER_IN_FLIGHT = 512
#: Progress messages the relay queue on the cluster holds (more are dropped), and how long the
#: forwarding thread waits for one.
RELAY_MAX = 10_000
RELAY_POLL_S = 0.5


class ClusterError(RuntimeError):
    """The configured cluster cannot be used (unreachable, Ray missing, a task lost)."""


def make_executor(config: Settings, *, max_workers: int,
                  initializer: Optional[Callable[..., None]] = None,
                  initargs: tuple = ()) -> Executor:
    """The executor for per-file work: a Ray cluster when configured, else local worker
    processes (`workers.WorkerPool`), or this process itself for `max_workers=0` (a few small
    files: starting processes would cost more than it saves). `initializer(*initargs)` runs
    once in each worker process; its first argument, when a local queue (the parsers'
    progress), is replaced by a relay into that queue (a pipe locally, a queue actor on Ray)."""
    if config.cluster:
        return RayExecutor(config.cluster, initializer=initializer, initargs=initargs)
    if max_workers < 1:
        return InlineExecutor()
    return WorkerPool(max_workers, initializer=initializer, initargs=initargs)


def is_remote(executor: Executor) -> bool:
    return isinstance(executor, RayExecutor)


class InlineExecutor(Executor):
    """Runs each submitted call at once, in this process (the futures come back done)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(exc)
        return future


_initialised: set[str] = set()  # in a Ray worker: the executors whose initializer ran here


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict, init: Any = None) -> Any:
    """What a Ray task runs: the executor's initializer once per worker process and executor
    (`init` = (token, initializer, args)), then the submitted module-level function."""
    if init is not None and init[0] not in _initialised:
        init[1](*init[2])
        _initialised.add(init[0])
    return fn(*args, **kwargs)


class RayExecutor(Executor):
    """`submit(fn, *args)` as a Ray task; results come back as `concurrent.futures.Future`s.

    The connection is made once, when the executor is created; `error` holds the reason when
    it could not be (then every submitted future fails with it). A task whose worker dies is
    retried by Ray (`TASK_RETRIES`); the cache's commit markers make a half-written entry of a
    killed worker invisible, so the retry just writes it again.
    """

    def __init__(self, address: str, timeout_s: float = CONNECT_TIMEOUT_S, *,
                 initializer: Optional[Callable[..., None]] = None, initargs: tuple = ()) -> None:
        self.address = address
        self._init: Any = None
        self.error: Optional[ClusterError] = None
        self._owns_connection = False
        self._lock = threading.Lock()
        self._pending: dict[int, Any] = {}
        self._closed = False
        try:
            self._ray = _import_ray()
            self._connect(timeout_s)
            self._task = self._ray.remote(_call).options(max_retries=TASK_RETRIES,
                                                         retry_exceptions=False)
            if initializer is not None:
                self._init = (uuid.uuid4().hex, initializer, self._relay(initargs))
        except ClusterError as exc:
            self.error = exc
            log.error("torch-prof: %s", exc)

    def _connect(self, timeout_s: float) -> None:
        ray = self._ray
        if self.address != "auto":
            _probe(self.address, timeout_s)
        if ray.is_initialized():  # the caller (a notebook, a test, a Ray job) connected already
            return
        result: dict[str, Any] = {}
        RAY_WORKER_LOG.addFilter(OFF_MAIN_THREAD_NOTE)  # once: a filter is added only once

        def connect() -> None:
            try:
                ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False,
                         logging_level=logging.WARNING)
            except Exception as exc:  # noqa: BLE001 - reported with the address below
                result["error"] = exc

        thread = threading.Thread(target=connect, name="torch-prof-ray-connect", daemon=True)
        thread.start()
        thread.join(timeout_s * 4)  # the TCP probe passed: Ray's own handshake gets longer
        if thread.is_alive():
            raise ClusterError(f"the Ray cluster at {self.address} did not answer within "
                               f"{timeout_s * 4:.0f} s ({CLUSTER_ENV})")
        if "error" in result:
            exc = result["error"]
            raise ClusterError(f"cannot connect to the Ray cluster at {self.address} "
                               f"({CLUSTER_ENV}): {type(exc).__name__}: {exc}")
        self._owns_connection = True

    def _relay(self, initargs: tuple) -> tuple:
        """The initializer's arguments for the workers: a local queue (the parser's progress
        messages) becomes a queue actor on the cluster, and a thread here moves what arrives
        there into the local queue."""
        if not initargs or not hasattr(initargs[0], "put_nowait"):
            return initargs
        local = initargs[0]
        relay = importlib.import_module("ray.util.queue").Queue(
            maxsize=RELAY_MAX, actor_options={"num_cpus": 0})
        threading.Thread(target=self._forward, args=(relay, local), daemon=True,
                         name="torch-prof-ray-progress").start()
        return (relay, *initargs[1:])

    def _forward(self, relay: Any, local: Any) -> None:
        while not self._closed:
            try:
                item = relay.get(block=True, timeout=RELAY_POLL_S)
            except queue.Empty:
                continue
            except Exception:  # noqa: BLE001 - the cluster went away: progress stops, not work
                return
            with contextlib.suppress(queue.Full, OSError, ValueError):
                local.put_nowait(item)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        if self.error is not None or self._closed:
            future.set_exception(self.error or RuntimeError("the executor is shut down"))
            return future
        ref = self._task.remote(fn, args, kwargs, self._init)
        with self._lock:
            self._pending[id(future)] = ref
        ref.future().add_done_callback(lambda done: self._settle(future, done))
        return future

    def _settle(self, future: Future, done: Future) -> None:
        with self._lock:
            self._pending.pop(id(future), None)
        if future.cancelled():
            return
        exc = done.exception()
        if exc is None:
            future.set_result(done.result())
        elif _is_system_failure(exc):
            future.set_exception(ClusterError(
                f"the Ray worker parsing this file died {TASK_RETRIES + 1} times (out of "
                f"memory, or killed): {type(exc).__name__}"))
        else:  # the function's own exception, re-raised as it was
            future.set_exception(getattr(exc, "cause", None) or exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures or not wait:
            with self._lock:
                refs = list(self._pending.values())
            for ref in refs:  # already finished, or the cluster is gone: nothing to cancel
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref, force=True)
        if self._owns_connection:
            self._owns_connection = False
            self._ray.shutdown()


class _OffMainThreadNote(logging.Filter):
    """Drops Ray's "SIGTERM handler is not set because current thread is not the main thread"
    warning, printed on every `--cluster` run: `ray.init` runs in a helper thread on purpose (a
    bounded wait for the handshake), and the executor shuts its connection down itself, so
    Ray's SIGTERM handler (sys.exit in the driver) is not wanted. Every other Ray message
    passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


RAY_WORKER_LOG = logging.getLogger("ray._private.worker")
OFF_MAIN_THREAD_NOTE = _OffMainThreadNote()


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ClusterError(f"{CLUSTER_ENV} is set but Ray is not installed ({exc}): "
                           'pip install "torch-prof[ray]"') from None


def _probe(address: str, timeout_s: float) -> None:
    """Fail fast, naming the address, when nothing listens there."""
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ClusterError(f"bad cluster address {address!r} ({CLUSTER_ENV}): {exc}") from None
    if not host or not port:
        raise ClusterError(f"bad cluster address {address!r} ({CLUSTER_ENV}): expected "
                           "ray://HOST:PORT, HOST:PORT or auto")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address} within {timeout_s:.0f} s "
                           f"({CLUSTER_ENV}): {exc}") from None


def _is_system_failure(exc: BaseException) -> bool:
    """A lost worker or node (Ray retried it already), not an exception of the task itself."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"WorkerCrashedError", "OutOfMemoryError", "NodeDiedError",
                         "ObjectLostError", "RaySystemError", "LocalRayletDiedError"})
