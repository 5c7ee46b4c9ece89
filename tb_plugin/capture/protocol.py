"""The files of a capture request, in the run folder (`LOGDIR/RUN/`), all small JSON:

- `.torch-prof-capture.request`: the request (`CaptureRequest`), written by `torch-prof
  capture` or the server's `/capture` route, replaced by the next one;
- `.torch-prof-listen.<worker>`: one per process of a job that listens (`Listener`), written at
  its first `step()` and removed when it stops;
- `.torch-prof-capture.<id>.<worker>.status`: one per request and worker (`CaptureStatus`):
  accepted, recording step k of N, written (with the files) or failed (with the reason).

The names do not end in `.json`, so discovery never mistakes them for traces. Every file is
written whole and then renamed (local) or put in one request (object stores), so a reader
never sees half of one; a file that is not valid is `Malformed`. Requests are authenticated by
file permissions only: whoever may write the run folder may ask for a capture.
"""

from __future__ import annotations

import os
import posixpath
import time
import uuid
from typing import Annotated, Any, Literal, Optional

import msgspec

from ..payloads.capture import MAX_STEPS
from ..storage import TooLarge, filesystem, is_local, read_bounded

REQUEST_NAME = ".torch-prof-capture.request"
LISTEN_PREFIX = ".torch-prof-listen."
STATUS_PREFIX = ".torch-prof-capture."
STATUS_SUFFIX = ".status"
#: Largest control file read (a request is ~300 bytes): anything bigger is malformed.
MAX_CONTROL_BYTES = 64 << 10
#: Folders below the logdir searched for listeners (`capture_targets`).
MAX_TARGET_DEPTH = 4
ID_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
TERMINAL = ("written", "failed")

State = Literal["accepted", "recording", "written", "failed"]


class Malformed(ValueError):
    """A control file that is not what its name says (bad JSON, bad field, too big)."""


class CaptureRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What to record: the next `steps` steps with these profiler options. Fields a job does
    not know (a newer requester) are ignored when it reads a request."""

    id: Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]
    steps: Annotated[int, msgspec.Meta(ge=1, le=MAX_STEPS)]
    record_shapes: bool = True
    profile_memory: bool = True
    with_stack: bool = False
    with_modules: bool = True
    #: Also dump a CUDA allocator snapshot beside the trace (where CUDA is available).
    memory_snapshot: bool = False
    requested_at: float = 0.0  # wall clock (s) of the requester, for the record


class CaptureStatus(msgspec.Struct, kw_only=True):
    """One worker's answer to one request."""

    id: str
    worker: str
    rank: Optional[int] = None
    state: State
    step: int = 0  # steps recorded so far
    steps: int
    files: list[str] = []  # base names of the files written (trace, snapshot)
    reason: str = ""  # why it failed
    notes: list[str] = []  # what was asked for and not done (no CUDA for a snapshot)
    updated_at: float = 0.0


class Listener(msgspec.Struct, kw_only=True):
    worker: str
    rank: Optional[int] = None
    pid: int
    since: float


_encoder = msgspec.json.Encoder()


def new_request(steps: int, **options: Any) -> CaptureRequest:
    """A request with a fresh id; `options` are `CaptureRequest`'s profiler flags. Raises
    `Malformed` for steps out of range or an unknown option."""
    unknown = sorted(set(options) - set(CaptureRequest.__struct_fields__))
    if unknown:
        raise Malformed(f"unknown capture options: {', '.join(unknown)}")
    fields = {"id": uuid.uuid4().hex[:16], "steps": steps, "requested_at": time.time(),
              **options}
    return decode(_encoder.encode(fields), CaptureRequest)


def decode(data: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.DecodeError as exc:  # ValidationError is one
        raise Malformed(str(exc)) from None


def status_name(request_id: str, worker: str) -> str:
    return f"{STATUS_PREFIX}{request_id}.{worker}{STATUS_SUFFIX}"


def listen_name(worker: str) -> str:
    return f"{LISTEN_PREFIX}{worker}"


# -- writing ------------------------------------------------------------------------------------


def write_file(run_dir: str, name: str, value: Any) -> None:
    """`value` as JSON in `run_dir/name`, appearing whole (see the module docstring)."""
    fs, folder = filesystem(run_dir)
    path = posixpath.join(folder, name)
    data = _encoder.encode(value)
    fs.makedirs(folder, exist_ok=True)
    if not is_local(fs):
        fs.pipe_file(path, data)
        return
    partial = os.path.join(folder, f"{name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as handle:
            handle.write(data)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise


def write_request(run_dir: str, request: CaptureRequest) -> None:
    write_file(run_dir, REQUEST_NAME, request)


def remove_file(run_dir: str, name: str) -> None:
    fs, folder = filesystem(run_dir)
    path = posixpath.join(folder, name)
    if fs.exists(path):
        fs.rm_file(path)


# -- reading ------------------------------------------------------------------------------------


def read_control(fs: Any, path: str, kind: type[Any]) -> Any:
    """One control file decoded as `kind`; `Malformed` if it is not one, OSError if unreadable."""
    try:
        data = read_bounded(fs, path, MAX_CONTROL_BYTES)
    except TooLarge:
        raise Malformed(f"over {MAX_CONTROL_BYTES} bytes") from None
    return decode(data, kind)


def _names(fs: Any, folder: str, prefix: str, suffix: str = "") -> list[str]:
    try:
        entries = fs.ls(folder, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = (posixpath.basename(str(entry).rstrip("/")) for entry in entries)
    return sorted(n for n in names if n.startswith(prefix) and n.endswith(suffix))


def listeners(run_dir: str) -> list[Listener]:
    """The processes listening in this run folder (malformed markers are left out)."""
    fs, folder = filesystem(run_dir)
    found = []
    for name in _names(fs, folder, LISTEN_PREFIX):
        try:
            found.append(read_control(fs, posixpath.join(folder, name), Listener))
        except (OSError, Malformed):
            continue  # removed meanwhile, or not ours
    return found


def statuses(run_dir: str, request_id: str) -> list[CaptureStatus]:
    """Every worker's status for this request, by worker name."""
    fs, folder = filesystem(run_dir)
    found = []
    for name in _names(fs, folder, f"{STATUS_PREFIX}{request_id}.", STATUS_SUFFIX):
        try:
            found.append(read_control(fs, posixpath.join(folder, name), CaptureStatus))
        except (OSError, Malformed):
            continue
    return sorted(found, key=lambda status: status.worker)


def capture_targets(logdir: str) -> dict[str, str]:
    """Run name -> folder, for every folder under `logdir` (up to `MAX_TARGET_DEPTH` below it)
    where a job listens. Run names are the folder's path relative to the logdir, as discovery
    names runs."""
    fs, root = filesystem(logdir)
    try:
        paths = fs.glob(posixpath.join(root, "**", f"{LISTEN_PREFIX}*"),
                        maxdepth=MAX_TARGET_DEPTH + 1)
    except (OSError, ValueError):
        return {}
    targets = {}
    for path in paths:
        folder = posixpath.dirname(str(path))
        rel = posixpath.relpath(folder, root) if folder != root else "."
        name = (posixpath.basename(root.rstrip("/")) or root) if rel == "." else rel
        targets[name] = folder
    return dict(sorted(targets.items()))


def summary(request_id: str, found: list[CaptureStatus], expected: int) -> dict[str, Any]:
    """The state of a request over its workers: `done` once `expected` workers (the listeners
    when it was made) have each written or failed."""
    terminal = [status for status in found if status.state in TERMINAL]
    return {"id": request_id, "expected": expected,
            "workers": [msgspec.to_builtins(status) for status in found],
            "done": expected > 0 and len(terminal) >= expected}
