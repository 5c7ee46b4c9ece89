"""`torch-prof capture LOGDIR --run R --steps N [--memory-snapshot] [--with-stack] [--wait]`:
ask a running job that listens (`Recorder(..., on_demand=True)`, `recorder.listen`) to record
its next N steps, by writing the request file into the run folder (`capture/protocol.py`).

Exit codes: 0 requested (with `--wait`: every listening worker wrote its trace); 1 with
`--wait`, some worker failed (its reason printed) or the wait timed out; 2 usage errors (a run
name that leaves the logdir, no job listening in the run, steps out of range).
"""

from __future__ import annotations

import argparse
import posixpath
import sys
import time
from typing import Any, TextIO

from .capture import protocol

COMMAND = "capture"
#: Seconds between two reads of the statuses while waiting.
WAIT_POLL_S = 0.2


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        COMMAND, help="ask a running job to record its next N steps",
        description="Ask a running job that listens (Recorder(..., on_demand=True) or "
        "tb_plugin.recorder.listen) to record its next N steps, through a request file in the "
        "run folder; every process of the job answers with its own trace.")
    parser.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    parser.add_argument("--run", required=True, help="the run folder the job writes to")
    parser.add_argument("--steps", type=int, default=5,
                        help=f"steps to record, 1 to {protocol.MAX_STEPS} (default 5)")
    parser.add_argument("--memory-snapshot", action="store_true",
                        help="also dump a CUDA allocator snapshot beside each trace")
    parser.add_argument("--with-stack", action="store_true",
                        help="record Python stacks (and the module view)")
    parser.add_argument("--no-shapes", action="store_true", help="do not record input shapes")
    parser.add_argument("--no-memory", action="store_true",
                        help="do not record allocations (profile_memory)")
    parser.add_argument("--wait", action="store_true",
                        help="show the job's status until every worker wrote its trace")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds --wait waits at most (default 600)")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    run_name = str(args.run).strip("/")
    parts = run_name.split("/")
    if not run_name or any(part in ("", ".", "..") for part in parts):
        err.write(f"torch-prof capture: --run {args.run!r} is not a folder name below the "
                  "logdir\n")
        return 2
    run_dir = posixpath.join(str(args.logdir).rstrip("/"), run_name)
    try:
        request = protocol.new_request(
            args.steps, with_stack=args.with_stack, memory_snapshot=args.memory_snapshot,
            record_shapes=not args.no_shapes, profile_memory=not args.no_memory)
    except protocol.Malformed as exc:
        err.write(f"torch-prof capture: {exc} (--steps is 1 to {protocol.MAX_STEPS})\n")
        return 2
    try:
        listening = protocol.listeners(run_dir)
        if not listening:
            err.write(f"torch-prof capture: no job listens in {run_dir} (no "
                      f"{protocol.LISTEN_PREFIX}* file); start it with Recorder(..., "
                      "on_demand=True) or tb_plugin.recorder.listen(...)\n")
            return 2
        protocol.write_request(run_dir, request)
    except OSError as exc:
        err.write(f"torch-prof capture: cannot write the request into {run_dir}: {exc}\n")
        return 2
    workers = ", ".join(listener.worker for listener in listening)
    out.write(f"requested capture {request.id}: {request.steps} steps from {len(listening)} "
              f"worker(s) of {run_name} ({workers})\n")
    out.flush()
    if not args.wait:
        return 0
    return _wait(run_dir, request.id, len(listening), args.timeout, out, err)


def _wait(run_dir: str, request_id: str, expected: int, timeout: float, out: TextIO,
          err: TextIO) -> int:
    shown: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while True:
        found = protocol.statuses(run_dir, request_id)
        for status in found:
            line = _status_line(status)
            if shown.get(status.worker) != line:
                shown[status.worker] = line
                out.write(line + "\n")
                out.flush()
        state = protocol.summary(request_id, found, expected)
        if state["done"]:
            failed = [status for status in found if status.state == "failed"]
            return 1 if failed else 0
        if time.monotonic() > deadline:
            err.write(f"torch-prof capture: {len(found)} of {expected} worker(s) answered "
                      f"within {timeout:g} s; the request stays in {run_dir}\n")
            return 1
        time.sleep(WAIT_POLL_S)


def _status_line(status: protocol.CaptureStatus) -> str:
    text = {"accepted": "accepted",
            "recording": f"recording step {status.step} of {status.steps}",
            "written": f"written: {', '.join(status.files)}",
            "failed": f"failed: {status.reason}"}[status.state]
    notes = "".join(f" ({note})" for note in status.notes)
    return f"{status.worker}: {text}{notes}"
