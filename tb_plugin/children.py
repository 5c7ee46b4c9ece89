"""Child processes die with their parent: no parser left running after TensorBoard or the CLI
is killed (SIGKILL, as the out-of-memory killer does, runs no clean-up in the parent).

`die_with_parent()` is the first call of every child entry point (the server's parser
processes, the split-parse helper). On Linux it asks the kernel for SIGKILL when the parent
dies (`prctl(PR_SET_PDEATHSIG)`, through ctypes: no dependency); elsewhere, or if that call
fails, a daemon thread watches the parent id and exits when the child is re-parented. Once the
parser processes are gone, multiprocessing's resource tracker sees its pipe close and exits too.

Note: PR_SET_PDEATHSIG fires when the *thread* that started the child ends. Our children are
started by threads that live as long as their pool (the server's loader thread) or by a main
thread (the CLI, a parser process), so that is the process's lifetime.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_INTERVAL_S = 1.0

_armed = False


def die_with_parent() -> str:
    """Arrange for this process to end when its parent does; returns the mechanism used
    ("prctl" or "watch"). Idempotent."""
    global _armed
    started_by = multiprocessing.parent_process()  # None outside multiprocessing children
    parent = started_by.pid if started_by is not None and started_by.pid else os.getppid()
    mechanism = "prctl" if sys.platform.startswith("linux") and _prctl_deathsig() else "watch"
    if os.getppid() != parent:  # the parent died before we were armed
        os._exit(1)
    if mechanism == "watch" and not _armed:
        threading.Thread(target=_watch, args=(parent,), name="torch-prof-parent-watch",
                         daemon=True).start()
    _armed = True
    return mechanism


def _prctl_deathsig() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(WATCH_INTERVAL_S):
        if os.getppid() != parent:
            os._exit(1)
