"""Process helpers for the orphan tests (issue 19 item 7), from /proc and pidfds (Linux)."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.01


def children_of(pid: int) -> list[int]:
    """Live child processes of `pid` (every thread's children file)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in children.read_text().split()]
        except OSError:  # the thread or process ended meanwhile
            continue
    return sorted(set(found))


def descendants_of(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in children_of(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def wait_for(probe: Callable[[], T], timeout: float) -> T:
    """Poll `probe` until it returns something truthy (returned), or until `timeout` (then its
    last, falsy, value is returned). For things that have no event to wait on."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not value and time.monotonic() < deadline:
        time.sleep(POLL_S)
        value = probe()
    return value


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait (on pidfds: no polling) until every process of `pids` has exited; return those
    still running after `timeout`."""
    deadline = time.monotonic() + timeout
    alive = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # already gone (and reaped)
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready and _running(pid):
                alive.append(pid)
        finally:
            os.close(fd)
    return alive


def _running(pid: int) -> bool:
    """Exists and is not a zombie (a zombie has exited, waiting to be reaped by init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
