"""What the cluster tests share: Ray (required in CI), a free port, waiting for a pool's files."""

from __future__ import annotations

import os
import socket
import threading
import time
from types import ModuleType

import pytest

REQUIRE_RAY_ENV = "REQUIRE_RAY"


def import_ray() -> ModuleType:
    """`import ray`; a skip without it, unless `REQUIRE_RAY=1` (CI) makes that a failure."""
    try:
        import ray
    except ImportError as error:
        if os.environ.get(REQUIRE_RAY_ENV) == "1":
            pytest.fail(f"ray is not importable ({error}) and {REQUIRE_RAY_ENV}=1",
                        pytrace=False)
        pytest.skip(f'ray is not installed ({error}): pip install "torch-prof[ray]"')
    return ray


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(host: str, port: int, timeout: float) -> bool:
    """Whether something accepts connections on host:port within `timeout` seconds (polled:
    the observable state of another process's server; the timeout only guards a hang)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


class Outcomes:
    """Counts a LoadPool's outcomes; `wait()` returns once `expected` have arrived."""

    def __init__(self, expected: int) -> None:
        self.expected, self.outcomes = expected, []
        self._done = threading.Event()
        self._lock = threading.Lock()

    def wrap(self, on_done):
        def record(outcome):
            on_done(outcome)
            with self._lock:
                self.outcomes.append(outcome)
                if len(self.outcomes) >= self.expected:
                    self._done.set()
        return record

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)
