"""The job's side of capture on demand (`Recorder(..., on_demand=True)`, `recorder.listen`).

At each `step()` the watch looks at the clock; at most every `poll_s` seconds it stats the
request file of its run folder (one `info` call through fsspec) and reads it only when its
size or mtime changed. A new request (an id not answered yet) starts a capture: the next
`steps` steps (after one warm-up step) are recorded with the request's options by a fresh
one-span `Recorder`, and,
when asked for and CUDA is available, the CUDA allocator's history is recorded and dumped
beside the trace (`<worker>.<ts>.snapshot.pickle`, which the Memory view pairs with it).

Rules, all of them so that training is never harmed:

- nothing raises out of `step()` or `close()`: a failure is logged (logger
  `tb_plugin.capture.watch`) and, during a capture, reported in its status;
- a malformed request is logged once (per version of the file) and ignored;
- a request is answered once per process (by id); a request already there at the first
  `step()` was meant for an earlier job and is not answered;
- while a capture records, the request file is not polled: a capture in progress is never
  restarted, and a newer request is answered after it ends;
- every process of a job answers the same request (each writes its own trace and status,
  named by its worker name, which carries the rank).

Status: `accepted` (when the request is seen), `recording` (step k of N, after each step),
then `written` (the files) or `failed` (the reason). See `protocol.py` for the files.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..storage import filesystem
from .protocol import (
    REQUEST_NAME,
    CaptureRequest,
    CaptureStatus,
    Listener,
    Malformed,
    listen_name,
    read_control,
    remove_file,
    status_name,
    write_file,
)

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot.pickle"
#: Steps the profiler warms up for before the N recorded ones (torch.profiler.schedule's
#: warmup: the tracer's start-up costs stay out of the first recorded step).
WARMUP_STEPS = 1
#: Allocation events the CUDA allocator history keeps (torch's own default).
MEMORY_HISTORY_ENTRIES = 100_000

#: `make_recorder(request)`: a started-on-`start()` one-span recorder (`Recorder` duck type:
#: start, step, stop, profiler, written, last_error).
RecorderFactory = Callable[[CaptureRequest], Any]
#: `publish(src, dest)`: copy a finished local file to its final name atomically.
Publisher = Callable[[str, str], None]


@dataclass
class _Capture:
    request: CaptureRequest
    recorder: Any
    status: CaptureStatus
    snapshot: bool
    notes: list[str] = field(default_factory=list)
    calls: int = 0  # steps since the capture started (the warm-up included)


class CaptureWatch:
    """Polls `run_dir` for capture requests and records them; see the module docstring.

    Args:
        run_dir: the run folder (a local path or an fsspec URL; traces are written locally).
        worker: the worker name (called at the first step, when the rank is known).
        rank: this process's rank, or None.
        make_recorder, publish: see `RecorderFactory` and `Publisher`.
        poll_s: seconds between two stats of the request file.
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(self, run_dir: str, *, worker: Callable[[], str],
                 rank: Callable[[], Optional[int]], make_recorder: RecorderFactory,
                 publish: Publisher, poll_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not poll_s > 0:
            raise ValueError(f"poll_s must be > 0, got {poll_s!r}")
        self.run_dir = run_dir
        self.poll_s = poll_s
        #: The final status of every capture this process answered, in order.
        self.finished: list[CaptureStatus] = []
        self._worker, self._rank = worker, rank
        self._make_recorder, self._publish, self._clock = make_recorder, publish, clock
        self._request_path = f"{run_dir.rstrip('/')}/{REQUEST_NAME}"
        self._fs: Any = None
        self._next_poll = 0.0
        self._seen: Any = None  # (size, inode, mtime) of the request file last read
        self._answered: set[str] = set()
        self._listening: Optional[str] = None  # the worker name of our listener marker
        self._capture: Optional[_Capture] = None
        self._failed_polls = 0

    @property
    def recording(self) -> bool:
        return self._capture is not None

    def step(self) -> None:
        """The end of one training step. Never raises."""
        try:
            if self._capture is not None:
                self._advance(self._capture)
                return
            now = self._clock()
            if now < self._next_poll:
                return
            self._next_poll = now + self.poll_s
            self._poll()
        except Exception:
            self._failed_polls += 1
            if self._failed_polls <= 3 or self._failed_polls % 1000 == 0:
                log.warning("torch-prof capture: watching %s failed (%d times); training "
                            "continues", self.run_dir, self._failed_polls, exc_info=True)

    def close(self) -> None:
        """The job ends: finish a capture under way (its steps so far), stop listening."""
        try:
            if self._capture is not None:
                self._finish(self._capture, ended=True)
            if self._listening is not None:
                remove_file(self.run_dir, listen_name(self._listening))
                self._listening = None
        except Exception:
            log.warning("torch-prof capture: closing the watch of %s failed", self.run_dir,
                        exc_info=True)

    # -- polling --------------------------------------------------------------------------------

    def _poll(self) -> None:
        first = self._listening is None
        request = self._read_request()
        if first:  # answered by an earlier job (or never): not ours
            if request is not None:
                self._answered.add(request.id)
            self._listen()
            return
        if request is None:
            return
        if request.id in self._answered:
            log.info("torch-prof capture: request %s was answered already; not again",
                     request.id)
            return
        self._answered.add(request.id)
        self._begin(request)

    def _read_request(self) -> Optional[CaptureRequest]:
        if self._fs is None:
            self._fs, self._request_path = filesystem(self._request_path)
        try:
            info = self._fs.info(self._request_path)
        except FileNotFoundError:
            return None
        # a request is replaced by a rename: a new inode even within one mtime tick (local)
        version = (info.get("size"), info.get("ino"), info.get("mtime")
                   or info.get("LastModified") or info.get("ETag"))
        if version == self._seen:
            return None
        self._seen = version
        try:
            return read_control(self._fs, self._request_path, CaptureRequest)
        except FileNotFoundError:
            return None
        except Malformed as exc:
            log.warning("torch-prof capture: ignoring the malformed request %s: %s",
                        self._request_path, exc)
            return None

    def _listen(self) -> None:
        worker = self._worker()
        marker = Listener(worker=worker, rank=self._rank(), pid=os.getpid(), since=time.time())
        write_file(self.run_dir, listen_name(worker), marker)
        self._listening = worker
        log.info("torch-prof capture: %s listens for requests in %s", worker, self.run_dir)

    # -- a capture ------------------------------------------------------------------------------

    def _begin(self, request: CaptureRequest) -> None:
        worker = self._listening or self._worker()
        status = CaptureStatus(id=request.id, worker=worker, rank=self._rank(),
                               state="accepted", steps=request.steps, updated_at=time.time())
        self._write_status(status)
        log.info("torch-prof capture: request %s: recording %d steps", request.id,
                 request.steps)
        capture = _Capture(request, None, status, snapshot=False)
        try:
            if request.memory_snapshot:
                capture.snapshot = _start_memory_history(capture.notes)
            capture.recorder = self._make_recorder(request)
            capture.recorder.start()
        except Exception as exc:
            log.warning("torch-prof capture: request %s could not start", request.id,
                        exc_info=True)
            self._end(capture, "failed", reason=f"the profiler did not start: {exc!r}")
            return
        if capture.recorder.profiler is None:
            self._end(capture, "failed", reason=capture.recorder.last_error
                      or "the profiler did not start")
            return
        self._capture = capture

    def _advance(self, capture: _Capture) -> None:
        capture.recorder.step()  # the end of the N-th step after the warm-up writes the trace
        capture.calls += 1
        capture.status.step = max(0, capture.calls - WARMUP_STEPS)
        if (capture.calls >= capture.request.steps + WARMUP_STEPS or capture.recorder.written
                or capture.recorder.profiler is None):
            self._finish(capture)
            return
        capture.status.state = "recording"
        self._write_status(capture.status)

    def _finish(self, capture: _Capture, ended: bool = False) -> None:
        self._capture = None
        recorder = capture.recorder
        recorder.stop()  # writes the span when the job ends before its N steps
        if ended:
            capture.notes.append(f"the job stopped after {capture.status.step} of "
                                 f"{capture.request.steps} steps")
        if not recorder.written:
            _stop_memory_history(capture.snapshot)
            self._end(capture, "failed", reason=recorder.last_error or "no trace was written")
            return
        files = [os.path.basename(path) for path in recorder.written]
        if capture.snapshot:
            files += self._dump_snapshot(recorder.written[0], capture.notes)
        _stop_memory_history(capture.snapshot)
        capture.status.files = files
        self._end(capture, "written")

    def _dump_snapshot(self, trace: str, notes: list[str]) -> list[str]:
        dest = trace.split(".pt.trace.json", 1)[0] + SNAPSHOT_SUFFIX
        folder = tempfile.mkdtemp(prefix="torch-prof-")
        try:
            src = os.path.join(folder, "snapshot.pickle")
            _dump_memory_snapshot(src)
            self._publish(src, dest)
            return [os.path.basename(dest)]
        except Exception as exc:
            log.warning("torch-prof capture: the memory snapshot failed", exc_info=True)
            notes.append(f"the memory snapshot failed: {exc!r}")
            return []
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _end(self, capture: _Capture, state: str, reason: str = "") -> None:
        status = capture.status
        status.state = state  # type: ignore[assignment]
        status.reason = reason
        status.notes = capture.notes
        self._write_status(status)
        self.finished.append(status)
        log.info("torch-prof capture: request %s %s%s", status.id, state,
                 f": {reason}" if reason else "")

    def _write_status(self, status: CaptureStatus) -> None:
        status.updated_at = time.time()
        try:
            write_file(self.run_dir, status_name(status.id, status.worker), status)
        except Exception:
            log.warning("torch-prof capture: cannot write the status of %s", status.id,
                        exc_info=True)


def _start_memory_history(notes: list[str]) -> bool:
    """Record the CUDA allocator's history, if CUDA is available; else say why not."""
    import torch  # lazy: importing the watch does not import torch

    if not torch.cuda.is_available():
        notes.append("no memory snapshot: CUDA is not available in this process")
        return False
    torch.cuda.memory._record_memory_history(max_entries=MEMORY_HISTORY_ENTRIES)
    return True


def _dump_memory_snapshot(path: str) -> None:
    import torch

    torch.cuda.memory._dump_snapshot(path)


def _stop_memory_history(started: bool) -> None:
    if not started:
        return
    import torch

    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except Exception:
        log.warning("torch-prof capture: stopping the memory history failed", exc_info=True)
