"""Local worker processes that start light: a `concurrent.futures.Executor` over plain `python`
children that speak pickle on their standard input and output.

Why not `ProcessPoolExecutor`: with `spawn` (TensorBoard is multi-threaded, so `fork` is unsafe)
each child first re-runs the parent's `__main__`, and under TensorBoard that is the
`tensorboard` script: 0.2 s of TensorBoard imports before a parser reads its first byte. And a
result travels as one pickle: a 60 MB table is copied into the pickle, through the pipe, and out
of it again (0.17 s for a 200 MB trace, measured in bench/cold_open.py). A worker here imports
only this module and the module of its initializer (the parser's), and arrays travel out of
band (pickle protocol 5): written from their own memory into the pipe and read straight into
the buffer the unpickled array keeps.

Each worker is `python -c "...serve()" torch-prof-worker` (the last word names it in `ps`),
started in the thread that calls `submit` (children.py: a child dies with the thread that
started it), with the parent's `sys.path`. Messages are framed: a header (pickle length,
buffer count), the pickle, then each out-of-band buffer with its length. The child writes only
to a private copy of its stdout; its fd 1 is pointed at stderr, so a stray print of a library
cannot corrupt the channel. One thread per worker here sends a call and reads until its result.

Semantics follow `ProcessPoolExecutor` where the server relies on them: a worker that dies
fails its call with `WorkerDied` (a `BrokenProcessPool`, with the exit code) and breaks the
pool (no new calls; queued calls fail the same way), while the other workers finish their
calls. `initializer(*initargs)` runs once in each worker; when the first initarg is a queue
(it has `put_nowait`) the worker gets a relay instead, whose items are put into that queue here
(the parsers' progress; `RayExecutor` keeps the same convention).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import traceback
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any, BinaryIO, Callable, Optional

from .children import die_with_parent

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

#: The last word of a worker's command line (what `ps` and the tests look for).
WORKER_NAME = "torch-prof-worker"
_HEADER = struct.Struct("<QI")  # pickle length, number of out-of-band buffers
_LENGTH = struct.Struct("<Q")
_STOP_WAIT_S = 5.0
#: Bytes a result pipe holds (Linux; the default 64 KB makes a 60 MB table take 1,000 context
#: switches: its hand-over 0.11 -> 0.055 s at 1 MB, bench/cold_open.py's 200 MB trace).
_PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # <linux/fcntl.h>; fcntl.F_SETPIPE_SZ from Python 3.10


class WorkerDied(BrokenProcessPool):
    """A worker process ended during a call (killed by a signal, or exited)."""

    def __init__(self, message: str, exitcode: Optional[int]) -> None:
        super().__init__(message)
        self.exitcode = exitcode


# -- framing -------------------------------------------------------------------------------


def encode(obj: Any) -> list[Any]:
    """One message as the pieces to write: pickling happens here, before anything is written,
    so an object that cannot be pickled raises here and leaves the channel as it was."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [buffer.raw() for buffer in buffers]
    pieces: list[Any] = [_HEADER.pack(len(data), len(raws)), data]
    for raw in raws:
        pieces += [_LENGTH.pack(raw.nbytes), raw]
    return pieces


def write(stream: BinaryIO, pieces: list[Any]) -> None:
    """Write an encoded message (OSError or ValueError when the other side is gone)."""
    for piece in pieces:
        stream.write(piece)
    stream.flush()


def recv(stream: BinaryIO) -> Any:
    """Read one message (EOFError when the other side is gone)."""
    return load(read_frame(stream))


def read_frame(stream: BinaryIO) -> tuple[bytearray, list[bytearray]]:
    """Read one message's pickle and buffers, not yet unpickled: a message that cannot be
    unpickled (say, its function's module is missing) is then read whole all the same, and
    the channel stays in step."""
    size, count = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    data = _read_exactly(stream, size)
    buffers = [_read_exactly(stream, _LENGTH.unpack(_read_exactly(stream, _LENGTH.size))[0])
               for _ in range(count)]
    return data, buffers


def load(frame: tuple[bytearray, list[bytearray]]) -> Any:
    data, buffers = frame
    return pickle.loads(data, buffers=buffers)


def _read_exactly(stream: BinaryIO, size: int) -> bytearray:
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        read = stream.readinto(view[done:])
        if not read:
            raise EOFError("the other side of the channel is gone")
        done += read
    return buffer


# -- the child's side ------------------------------------------------------------------------


class _Relay:
    """In a worker: `put_nowait(item)` sends the item to the parent's queue."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def put_nowait(self, item: Any) -> None:
        write(self._stream, encode(("progress", item)))


def serve() -> None:
    """A worker's main loop: run the initializer (the first message; a failure ends the worker
    with exit code 1, as the parent then sees), then each call it is sent, and send back its
    result or exception (one reply per call, whatever happens)."""
    channel_in = sys.stdin.buffer
    channel_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us on Ctrl-C
    die_with_parent()
    try:
        initializer, args = recv(channel_in)
        if initializer is not None:
            if args and args[0] is _RELAY_MARK:
                args = (_Relay(channel_out), *args[1:])
            initializer(*args)
    except EOFError:
        return
    except Exception:  # noqa: BLE001 - reported here, and by the exit code to the parent
        traceback.print_exc()
        sys.exit(1)
    while True:
        try:
            frame = read_frame(channel_in)
        except EOFError:  # the parent closed the channel: stop
            return
        try:
            fn, args, kwargs = load(frame)
            reply: tuple[str, Any] = ("result", fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's future
            reply = ("error", _portable(exc))
        try:
            pieces = encode(reply)
        except Exception as exc:  # noqa: BLE001 - the result itself cannot be pickled
            pieces = encode(("error", _portable(exc)))
        write(channel_out, pieces)


class _RelayMark:
    """Stands for the relay in the initializer's arguments sent to a worker."""

    def __reduce__(self) -> str:
        return "_RELAY_MARK"


_RELAY_MARK = _RelayMark()


def _portable(exc: BaseException) -> BaseException:
    """The exception, with its traceback as a note, or a RuntimeError naming it when it cannot
    be pickled."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        pickle.dumps(exc, protocol=5)
    except Exception:  # noqa: BLE001 - any pickling failure
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    if hasattr(exc, "add_note"):
        exc.add_note(f"in the worker process:\n{text}")
    return exc


# -- the parent's side -----------------------------------------------------------------------


class _Worker:
    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.stdin: BinaryIO = process.stdin  # type: ignore[assignment]
        self.stdout: BinaryIO = process.stdout  # type: ignore[assignment]


class WorkerPool(Executor):
    """Up to `max_workers` worker processes, started on demand by `submit`."""

    def __init__(self, max_workers: int, initializer: Optional[Callable[..., None]] = None,
                 initargs: tuple = ()) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._relay: Any = None
        if initargs and hasattr(initargs[0], "put_nowait"):
            self._relay, initargs = initargs[0], (_RELAY_MARK, *initargs[1:])
        self._init = (initializer, initargs)
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._queued = 0
        self._broken: Optional[WorkerDied] = None
        self._shutdown = False

    # -- Executor ------------------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._lock:
            if self._broken is not None:
                raise self._broken
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            if self._queued >= self._idle and len(self._workers) < self.max_workers:
                self._start_worker()  # raises WorkerDied when no process can be started
            future: Future = Future()
            self._queued += 1
            self._tasks.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            self._fail_queued(None)
        for _ in threads:
            self._tasks.put(None)  # each worker's thread stops at one
        if wait:
            for thread in threads:
                thread.join()

    # -- beyond Executor -------------------------------------------------------------------------

    def processes(self) -> list[subprocess.Popen]:
        """The worker processes started so far (alive or not)."""
        with self._lock:
            return [worker.process for worker in self._workers]

    def kill(self) -> None:
        """Stop now: no new calls, queued ones cancelled, every worker killed and reaped."""
        self.shutdown(wait=False, cancel_futures=True)
        processes = self.processes()
        for process in processes:
            with contextlib.suppress(OSError):
                process.kill()
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_STOP_WAIT_S)

    # -- workers -------------------------------------------------------------------------------

    def _start_worker(self) -> None:
        code = (f"import sys; sys.path[:] = {sys.path!r}; "
                "from tb_plugin.workers import serve; serve()")
        try:
            process = subprocess.Popen([sys.executable, "-c", code, WORKER_NAME],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:  # no interpreter to run (sys.executable), or out of processes
            raise WorkerDied(f"cannot start a worker process ({sys.executable}): {exc}",
                             None) from exc
        if fcntl is not None and sys.platform.startswith("linux"):
            with contextlib.suppress(OSError):  # over /proc/sys/fs/pipe-max-size: keep 64 KB
                fcntl.fcntl(process.stdout.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore
        worker = _Worker(process)
        thread = threading.Thread(target=self._serve, args=(worker,), daemon=True,
                                  name=f"torch-prof-worker-{process.pid}")
        self._workers.append(worker)
        self._threads.append(thread)
        thread.start()

    def _serve(self, worker: _Worker) -> None:
        future: Optional[Future] = None
        try:
            write(worker.stdin, encode(self._init))
            while True:
                future = None
                item = self._next_task()
                if item is None:
                    break
                future, fn, args, kwargs = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    pieces = encode((fn, args, kwargs))
                except Exception as exc:  # noqa: BLE001 - the call cannot be pickled
                    future.set_exception(exc)
                    continue
                write(worker.stdin, pieces)
                self._await_reply(worker, future)
        except (EOFError, OSError, ValueError):  # the worker died (or its pipe broke)
            self._died(worker, future)
            return
        except BaseException:  # a bug here: never leave a caller waiting
            worker.process.kill()
            self._died(worker, future)
            raise
        self._stop(worker)

    def _next_task(self) -> Any:
        """The next call to run, or None: stop (shut down, or the pool broke)."""
        with self._lock:
            self._idle += 1
        item = self._tasks.get()
        with self._lock:
            self._idle -= 1
            if item is not None:
                self._queued -= 1
            broken = self._broken
        if item is not None and broken is not None:  # a broken pool runs nothing more
            if item[0].set_running_or_notify_cancel():
                item[0].set_exception(broken)
            return None
        return item

    def _await_reply(self, worker: _Worker, future: Future) -> None:
        while True:
            frame = read_frame(worker.stdout)
            try:
                kind, value = load(frame)
            except Exception as exc:  # noqa: BLE001 - an exception class that cannot be
                # rebuilt here (progress items are plain tuples: only a reply can fail)
                future.set_exception(RuntimeError(
                    f"the worker's reply could not be read: {type(exc).__name__}: {exc}"))
                return
            if kind == "progress":
                if self._relay is not None:
                    with contextlib.suppress(queue.Full, OSError, ValueError):
                        self._relay.put_nowait(value)
                continue
            if kind == "result":
                future.set_result(value)
            else:
                future.set_exception(value)
            return

    def _died(self, worker: _Worker, future: Optional[Future]) -> None:
        try:
            code: Optional[int] = worker.process.wait(_STOP_WAIT_S)
        except subprocess.TimeoutExpired:  # its channel broke, yet it runs: end it
            worker.process.kill()
            code = worker.process.wait()
        broken = WorkerDied(f"a worker process ended during a call (exit code {code})", code)
        with self._lock:
            if self._broken is None:
                self._broken = broken
        if future is not None and not future.done():
            future.set_exception(broken)
        self._fail_queued(self._broken)
        with contextlib.suppress(OSError):
            worker.stdin.close()

    def _fail_queued(self, error: Optional[BaseException]) -> None:
        """Queued calls fail with `error` (cancelled when None)."""
        while True:
            try:
                item = self._tasks.get_nowait()
            except queue.Empty:
                return
            if item is None:
                self._tasks.put(None)  # a stop for a worker's thread: keep it
                return
            with self._lock:
                self._queued -= 1
            future = item[0]
            if error is None:
                future.cancel()  # a queued call is still pending: it is cancelled ...
            if future.set_running_or_notify_cancel():  # ... and notified (wait() sees it)
                future.set_exception(error)

    def _stop(self, worker: _Worker) -> None:
        """Close the worker's channel (it exits at once) and reap it."""
        with contextlib.suppress(OSError):
            worker.stdin.close()
        try:
            worker.process.wait(_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        with contextlib.suppress(OSError):
            worker.stdout.close()
