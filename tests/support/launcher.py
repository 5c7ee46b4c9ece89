"""The one way the tests start TensorBoard: `python -m tensorboard.main --port 0` from this
interpreter, its address read from the line TensorBoard prints once it listens (no free-port
race), stopped with SIGTERM (TensorBoard's graceful exit) when the `with` block ends."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tests.support import refuse_in_unit

#: "TensorBoard 2.x at http://127.0.0.1:PORT[/prefix]/ (Press CTRL+C to quit)"
_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C")
STARTUP_TIMEOUT_S = 90


@dataclass
class Process:
    """A started TensorBoard: its process, address (with any --path_prefix) and log file."""

    popen: subprocess.Popen
    base: str  # http://127.0.0.1:PORT[/prefix]
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20) -> float:
        """SIGTERM and wait; returns how long the exit took. Fails if SIGTERM is ignored."""
        started = time.monotonic()
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
                raise AssertionError(f"TensorBoard ignored SIGTERM for {timeout} s") from None
        return time.monotonic() - started


def start(logdir: Optional[Path], log_path: Path, env: dict[str, str], *extra: str,
          timeout: float = STARTUP_TIMEOUT_S) -> Process:
    """Start TensorBoard on `logdir` (None: pass --logdir_spec in `extra`) and wait until it
    prints its address. stdout and stderr go to `log_path`; the cwd is its folder."""
    refuse_in_unit("TensorBoard")
    args = [sys.executable, "-m", "tensorboard.main", "--port", "0", "--host", "127.0.0.1",
            *extra]
    if logdir is not None:
        args += ["--logdir", str(logdir)]
    with open(log_path, "wb") as log_file:  # the child keeps its own descriptor
        popen = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                 cwd=str(log_path.parent))
    process = Process(popen, "", log_path)
    deadline = time.monotonic() + timeout
    while True:
        match = _URL_LINE.search(log_path.read_text(errors="replace"))
        if match:
            process.base = match.group(1)
            return process
        if popen.poll() is not None:
            raise AssertionError(f"TensorBoard exited ({popen.returncode}):\n"
                                 f"{process.log_tail()}")
        if time.monotonic() > deadline:
            process.stop()
            raise AssertionError(f"TensorBoard printed no address in {timeout} s:\n"
                                 f"{process.log_tail()}")
        time.sleep(0.1)  # polling the log for the address line, not synchronising on time


@contextlib.contextmanager
def running(logdir: Optional[Path], log_path: Path, env: dict[str, str], *extra: str,
            timeout: float = STARTUP_TIMEOUT_S) -> Iterator[Process]:
    """`start(...)`, stopped with SIGTERM when the block ends (also on failure)."""
    process = start(logdir, log_path, env, *extra, timeout=timeout)
    try:
        yield process
    finally:
        process.stop()
