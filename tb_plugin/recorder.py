"""Record PyTorch profiler traces for torch-prof from a training script.

Three lines in the training loop::

    from tb_plugin.recorder import Recorder

    with Recorder("logs", run="resnet_bs32") as rec:
        for batch in loader:
            train_step(batch)
            rec.step()

Then ``tensorboard --logdir logs`` shows the run ``resnet_bs32`` (``torch-prof summary logs``
lists it on the command line).

What gets written
-----------------
One gzip'd Chrome trace per worker (process) per active span, into ``LOGDIR/RUN/``::

    <worker>.<timestamp_ms>.pt.trace.json.gz     # always
    <worker>.<timestamp_ms>.raw.json.gz          # with memory_timeline=True

This is the layout of ``torch.profiler.tensorboard_trace_handler(use_gzip=True)`` except that
the timestamp is in milliseconds (torch >= 2.1 writes ``time.time_ns()``); readers should
treat it as an opaque, sortable integer. The ``.raw.json.gz`` file is torch's
``export_memory_timeline`` raw export for the same span: a JSON list of
``[ts_ns, action, bytes, category]`` (see ``MEMORY_ACTIONS`` / ``MEMORY_CATEGORIES``).

Worker names
------------
``<hostname>_<pid>`` for a single process and ``<hostname>_<pid>_rank<R>`` once
``torch.distributed`` is initialised (or ``RANK`` is set by a launcher such as torchrun).
The hostname is sanitised to ``[A-Za-z0-9-]`` (dots and other characters become ``-``) so
the name never contains ``.`` (the separator before the timestamp) and still matches the
``^(.*)_(\\d+)`` node/pid convention of the distributed view: ``node_1234_rank0`` parses as
node ``node``, pid ``1234``. The name is resolved when a process writes its first span and
then frozen, so every span of one process lands under the same worker.

Never crashing the training job
-------------------------------
Failures to start the profiler, to step it or to write a file (unwritable directory, disk
full, ...) are logged via :mod:`logging` (logger ``tb_plugin.recorder``) and training goes
on. A failed start/step disables the recorder; a failed write only loses that span. Files
appear atomically (written as a hidden ``.*.partial`` file, then renamed), so a viewer that
scans the log dir while training never reads half a trace. Exceptions raised by the
training code itself are never swallowed.

Capture on demand
-----------------
``Recorder(..., on_demand=True)`` records nothing on a schedule: it listens. At each
``step()`` it stats a request file in its run folder (at most every ``poll_s`` seconds) and,
when ``torch-prof capture`` or the UI's "Capture profile" dialog asks, records the next N
steps with the requested options (see :mod:`tb_plugin.capture.watch`). ``listen(logdir,
run=...)`` does the same for a loop without ``step()`` calls (it steps at each
``optimizer.step()``).

Importing this module does not import torch; torch is imported when recording starts.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from .capture.protocol import CaptureRequest
from .capture.watch import WARMUP_STEPS, CaptureWatch

if TYPE_CHECKING:  # only for type checkers: importing torch here would cost seconds
    import torch.profiler

__all__ = [
    "MEMORY_ACTIONS",
    "MEMORY_CATEGORIES",
    "MEMORY_SUFFIX",
    "Recorder",
    "TRACE_SUFFIX",
    "default_worker_name",
    "listen",
    "sanitize_name",
]

log = logging.getLogger(__name__)

TRACE_SUFFIX = ".pt.trace.json.gz"
MEMORY_SUFFIX = ".raw.json.gz"
PARTIAL_SUFFIX = ".partial"

# Decoding of the raw memory-timeline records written by torch (torch/profiler/_memory_profiler.py
# `_ACTION_TO_INDEX` / `_CATEGORY_TO_INDEX`, unchanged from 2.1 to 2.13). Kept here so the
# analysis code need not import torch. INCREMENT_VERSION is written as two records at the same
# ts: -bytes in the old category and +bytes in the new one. PREEXISTING records have ts == -1.
MEMORY_ACTIONS = {1: "PREEXISTING", 2: "CREATE", 3: "INCREMENT_VERSION", 4: "DESTROY"}
MEMORY_CATEGORIES = {
    0: "PARAMETER",
    1: "OPTIMIZER_STATE",
    2: "INPUT",
    3: "TEMPORARY",
    4: "ACTIVATION",
    5: "GRADIENT",
    6: "AUTOGRAD_DETAIL",
    7: "UNKNOWN",
}

# gzip level 6: about as small as 9 on trace JSON, and markedly faster on 100 MB+ traces.
_GZIP_LEVEL = 6
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_HOST_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9-]+")

PathLike = Union[str, "os.PathLike[str]"]


def sanitize_name(name: str, *, allow_underscore: bool = True) -> str:
    """Replace characters that are awkward in file names (and ``.``) with ``-``."""
    pattern = _UNSAFE_CHARS if allow_underscore else _HOST_UNSAFE_CHARS
    return pattern.sub("-", name).strip("-")


def _env_rank() -> Optional[int]:
    """Rank set by a launcher (torchrun, torch.distributed.launch) for a multi-process job."""
    try:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            return int(os.environ["RANK"])
    except (KeyError, ValueError):
        pass
    return None


def _current_rank() -> Optional[int]:
    """This process's rank, or None when not running distributed."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # a broken distributed setup must not break recording
        log.debug("torch.distributed rank lookup failed", exc_info=True)
    return _env_rank()


def default_worker_name(rank: Optional[int] = None, hostname: Optional[str] = None) -> str:
    """``<hostname>_<pid>`` or ``<hostname>_<pid>_rank<R>``; see the module docstring.

    Underscores are removed from the hostname too, so the last ``_<digits>`` group of the
    name is always the pid, whatever the hostname looks like.
    """
    host = sanitize_name(hostname or socket.gethostname(), allow_underscore=False)
    name = f"{host or 'localhost'}_{os.getpid()}"
    return name if rank is None else f"{name}_rank{rank}"


def _publish(src: str, dest: str, *, compress: bool) -> None:
    """Copy ``src`` (gzip-compressing it if asked) to ``dest`` atomically.

    The bytes go to a hidden ``.partial`` file next to ``dest`` first: a viewer scanning the
    directory ignores it, and a crash or a full disk never leaves a truncated trace behind.
    """
    folder, name = os.path.split(dest)
    partial = os.path.join(folder, f".{name}{PARTIAL_SUFFIX}")
    try:
        with open(src, "rb") as fin:
            if compress:
                with gzip.open(partial, "wb", compresslevel=_GZIP_LEVEL) as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            else:
                with open(partial, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        os.replace(partial, dest)
    except BaseException:
        _remove_quietly(partial)
        raise


def _publish_plain(src: str, dest: str) -> None:
    _publish(src, dest, compress=False)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class Recorder:
    """Profile a training loop with ``torch.profiler`` and write traces for torch-prof.

    Args:
        logdir: root log directory (the one given to TensorBoard). Local paths only.
        run: run name; traces go to ``logdir/run/``. Compare runs by giving them names.
        worker: worker name used in file names; default ``<hostname>_<pid>[_rank<R>]``.
            A given name is sanitised to ``[A-Za-z0-9_-]`` and used as is (no rank added).
        wait, warmup, active, repeat, skip_first: the ``torch.profiler.schedule``. One span
            is ``wait + warmup + active`` steps long and ``active`` steps are recorded in it;
            ``repeat`` spans are written (0 = until the loop ends, which can fill a disk).
            The default (1, 1, 3, 2) records steps 2-4 and 7-9: two comparable spans, past
            the first step's one-time costs.
        record_shapes: record input shapes (operator and kernel views by shape).
        profile_memory: record allocations (memory view, ``[memory]`` events).
        with_stack: record Python stacks. In torch 2.x this is also what produces the
            ``nn.Module`` python_function events of the module view, and it is required
            for the memory timeline. Costs most overhead on Python-heavy loops.
        with_modules: record the module hierarchy (TorchScript); cheap, kept on.
        with_flops: estimate FLOPs of matmul/conv operators.
        activities: ``torch.profiler.ProfilerActivity`` values; default CPU, plus CUDA
            when ``torch.cuda.is_available()``.
        memory_timeline: also write ``<worker>.<ts>.raw.json.gz`` per span with
            ``export_memory_timeline``. Needs record_shapes, profile_memory and
            with_stack; slow on big traces (pure Python), so off by default.
        memory_device: device of the memory timeline; default the current CUDA device
            when CUDA is profiled, else ``"cpu"``.
        enabled: False turns the recorder into a no-op (keep the code, flip a flag).
        on_demand: record nothing on the schedule; record N steps when a capture is
            requested (module docstring, "Capture on demand"). The schedule arguments are
            then unused and the profiler flags are the request's.
        poll_s: on demand, the seconds between two looks at the request file.

    Attributes:
        written: paths of the files written so far, in order.
        failures: number of spans (or start/step calls) that failed and were logged.
        profiler: the underlying ``torch.profiler.profile`` while recording, else None.
        last_error: the last failure's message and exception, "" if none.
        watch: the on-demand `CaptureWatch` (its ``finished`` statuses), else None.
    """

    def __init__(
        self,
        logdir: PathLike = "logs",
        run: str = "default",
        *,
        worker: Optional[str] = None,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        repeat: int = 2,
        skip_first: int = 0,
        record_shapes: bool = True,
        profile_memory: bool = True,
        with_stack: bool = True,
        with_modules: bool = True,
        with_flops: bool = False,
        activities: Optional[Sequence[Any]] = None,
        memory_timeline: bool = False,
        memory_device: Optional[str] = None,
        enabled: bool = True,
        on_demand: bool = False,
        poll_s: float = 1.0,
    ) -> None:
        # Bad arguments are programming errors: fail here, before the first training step.
        _check_schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip=skip_first)
        self.run_dir = os.path.join(os.fspath(logdir), run)
        self.schedule = {
            "wait": wait,
            "warmup": warmup,
            "active": active,
            "repeat": repeat,
            "skip_first": skip_first,
        }
        self.options = {
            "record_shapes": record_shapes,
            "profile_memory": profile_memory,
            "with_stack": with_stack,
            "with_modules": with_modules,
            "with_flops": with_flops,
        }
        self.activities = activities
        self.memory_timeline = memory_timeline and self._memory_timeline_possible()
        self.memory_device = memory_device
        self.enabled = enabled
        self.written: list[str] = []
        self.failures = 0
        self.profiler: Optional[torch.profiler.profile] = None
        self._worker = sanitize_name(worker) if worker else None
        self._last_stamp = 0
        self.last_error = ""
        self.watch = CaptureWatch(
            self.run_dir, worker=self._freeze_worker, rank=_current_rank,
            make_recorder=self._capture_recorder, publish=_publish_plain, poll_s=poll_s,
        ) if on_demand and enabled else None

    # -- public API -------------------------------------------------------------------------

    @property
    def worker_name(self) -> str:
        """The worker name; frozen by the first written span (see module docstring)."""
        return self._worker or default_worker_name(_current_rank())

    def start(self) -> Recorder:
        """Start profiling (``with Recorder(...)`` calls this). Never raises."""
        if not self.enabled or self.profiler is not None or self.watch is not None:
            return self
        try:
            self.profiler = self._make_profiler()
            self.profiler.start()
        except Exception:
            self._fail("could not start the profiler; training continues without it")
            self.profiler = None
        return self

    def step(self) -> None:
        """Mark the end of one training step. Call once per iteration. Never raises."""
        if self.watch is not None:
            self.watch.step()
            return
        if self.profiler is None:
            return
        try:
            with warnings.catch_warnings():
                # Emitted once at the 2nd span: per-span traces are exactly what we want.
                warnings.filterwarnings("ignore", "Warning: Profiler clears events", UserWarning)
                self.profiler.step()
        except Exception:
            self._fail("profiler step failed; recording stops, training continues")
            self._stop_quietly()

    def stop(self) -> None:
        """Stop profiling; a span still being recorded is written. Never raises."""
        if self.watch is not None:
            self.watch.close()
        if self.profiler is None:
            return
        try:
            self.profiler.stop()
        except Exception:
            self._fail("stopping the profiler failed")
        self.profiler = None

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc_info: Any) -> bool:
        self.stop()
        return False  # never swallow the training loop's own exceptions

    # -- internals --------------------------------------------------------------------------

    def _memory_timeline_possible(self) -> bool:
        needed = ("record_shapes", "profile_memory", "with_stack")
        missing = [name for name in needed if not self.options[name]]
        if missing:
            log.warning("memory_timeline needs %s=True; not writing it", "=True, ".join(missing))
        return not missing

    def _make_profiler(self) -> torch.profiler.profile:
        import torch.profiler as tp  # lazy: keeps `import tb_plugin.recorder` torch-free

        return tp.profile(
            activities=self._activities(),
            schedule=tp.schedule(**self.schedule),
            on_trace_ready=self._on_trace_ready,
            **self.options,
        )

    def _activities(self) -> list[Any]:
        if self.activities is not None:
            return list(self.activities)
        import torch
        from torch.profiler import ProfilerActivity

        found = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            found.append(ProfilerActivity.CUDA)
        return found

    def _on_trace_ready(self, prof: torch.profiler.profile) -> None:
        """Called by torch at the end of each active span; must never raise into step()."""
        try:
            base = os.path.join(self.run_dir, f"{self._freeze_worker()}.{self._next_stamp()}")
            os.makedirs(self.run_dir, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix="torch-prof-")
        except Exception:
            self._fail(f"cannot write traces to {self.run_dir!r}; span dropped")
            return
        try:
            trace = base + TRACE_SUFFIX
            wrote_trace = self._write(trace, lambda: self._export_trace(prof, tmp, trace))
            if wrote_trace and self.memory_timeline:  # no orphan memory file without a trace
                self._write(base + MEMORY_SUFFIX, lambda: self._export_memory(prof, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _write(self, dest: str, export: Callable[[], tuple[str, bool]]) -> bool:
        """Run ``export`` (returns a temp file and whether to compress it), publish to dest."""
        try:
            src, compress = export()
            _publish(src, dest, compress=compress)
        except Exception:
            self._fail(f"could not write {dest!r}; training continues")
            return False
        self.written.append(dest)
        log.info("torch-prof: wrote %s", dest)
        return True

    @staticmethod
    def _export_trace(prof: torch.profiler.profile, tmp: str, dest: str) -> tuple[str, bool]:
        # Plain JSON in a temp dir, compressed by _publish: the same I/O as torch's own .gz
        # export, but the final file appears atomically and with our gzip level. Kineto
        # stores this path as "traceName", so at least its base name matches the final file.
        path = os.path.join(tmp, os.path.basename(dest)[: -len(".gz")])
        prof.export_chrome_trace(path)
        return path, True

    def _export_memory(self, prof: torch.profiler.profile, tmp: str) -> tuple[str, bool]:
        path = os.path.join(tmp, "memory" + MEMORY_SUFFIX)  # the suffix selects the raw format
        with warnings.catch_warnings():
            # Deprecated in favour of CUDA memory snapshots, which do not cover CPU runs.
            warnings.simplefilter("ignore", FutureWarning)
            prof.export_memory_timeline(path, device=self._memory_device())
        return path, False

    def _memory_device(self) -> str:
        if self.memory_device:
            return self.memory_device
        import torch
        from torch.profiler import ProfilerActivity

        if ProfilerActivity.CUDA in self._activities() and torch.cuda.is_available():
            # torch's own default is cuda:0, wrong for every rank but 0 of a multi-GPU job.
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    def _freeze_worker(self) -> str:
        if self._worker is None:
            self._worker = default_worker_name(_current_rank())
        return self._worker

    def _next_stamp(self) -> int:
        """Wall-clock ms, strictly increasing so two quick spans never share a file name."""
        self._last_stamp = max(time.time_ns() // 1_000_000, self._last_stamp + 1)
        return self._last_stamp

    def _capture_recorder(self, request: CaptureRequest) -> Recorder:
        """The one-span recorder of an on-demand capture: `request.steps` steps from now."""
        inner = Recorder(
            wait=0, warmup=WARMUP_STEPS, active=request.steps, repeat=1,
            worker=self._freeze_worker(),
            record_shapes=request.record_shapes, profile_memory=request.profile_memory,
            with_stack=request.with_stack, with_modules=request.with_modules,
            activities=self.activities)
        inner.run_dir = self.run_dir
        return inner

    def _fail(self, message: str) -> None:
        self.last_error = f"{message}: {sys.exc_info()[1]!r}"
        self.failures += 1
        log.error("torch-prof recorder: %s", message, exc_info=True)

    def _stop_quietly(self) -> None:
        profiler, self.profiler = self.profiler, None
        try:
            if profiler is not None:
                profiler.stop()
        except Exception:
            log.debug("profiler stop after failure also failed", exc_info=True)


def listen(logdir: PathLike = "logs", run: str = "default", *, poll_s: float = 1.0,
           worker: Optional[str] = None, activities: Optional[Sequence[Any]] = None
           ) -> Recorder:
    """Capture on demand in a job that does not call ``Recorder.step()``: one line,
    ``listen("logs", run="job")``. Each ``optimizer.step()`` of any torch optimizer is a step
    (a global optimizer hook); with several optimizers per iteration, use
    ``Recorder(..., on_demand=True)`` and its ``step()`` instead. Returns the recorder;
    ``stop()`` (also called at exit) stops listening and removes the hook. Never raises for
    a problem of its own (logged); bad arguments raise as ``Recorder`` does."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    recorder = Recorder(logdir, run, worker=worker, activities=activities, on_demand=True,
                        poll_s=poll_s)
    handle = register_optimizer_step_post_hook(lambda *_: recorder.step())
    stop = recorder.stop

    def stop_listening() -> None:
        handle.remove()
        stop()

    recorder.stop = stop_listening  # type: ignore[method-assign]
    atexit.register(stop_listening)
    return recorder


def _check_schedule(*, wait: int, warmup: int, active: int, repeat: int, skip: int) -> None:
    values = {"wait": wait, "warmup": warmup, "repeat": repeat, "skip_first": skip}
    for name, value in values.items():
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if not isinstance(active, int) or active < 1:
        raise ValueError(f"active must be an int >= 1, got {active!r}")
