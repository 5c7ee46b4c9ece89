"""`isolated.call_isolated`: the call runs in a fresh process whose address space is capped,
its result or exception comes back, a process that dies or runs out of memory becomes an
`IsolatedFailure` for the caller alone; and the snapshot reader's limit follows the settings."""

from __future__ import annotations

import os
import resource

import pytest

from tb_plugin.isolated import IsolatedFailure, call_isolated
from tb_plugin.settings import SNAPSHOT_MAX_ENV, SNAPSHOT_MEMORY_ENV, settings

GIB = 1 << 30


def test_the_call_runs_in_another_process_under_the_cap() -> None:
    assert call_isolated(os.getpid, memory_bytes=GIB) != os.getpid()
    soft, _ = call_isolated(resource.getrlimit, resource.RLIMIT_AS, memory_bytes=GIB)
    assert soft == GIB
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != GIB  # the caller's is untouched


def test_its_exception_comes_back() -> None:
    with pytest.raises(FileNotFoundError):
        call_isolated(os.stat, "/nonexistent/torch-prof", memory_bytes=GIB)


def test_running_out_of_memory_is_an_isolated_failure() -> None:
    with pytest.raises(IsolatedFailure, match="^it needs more than the 1024 MiB of memory"):
        call_isolated(bytearray, 2 * GIB, memory_bytes=GIB)
    assert len(call_isolated(bytearray, 1 << 20, memory_bytes=GIB)) == 1 << 20


def test_a_process_that_dies_is_an_isolated_failure() -> None:
    with pytest.raises(IsolatedFailure, match=r"its reader process ended .*exit code 3"):
        call_isolated(os._exit, 3, memory_bytes=GIB)


def test_the_reader_limit_follows_the_settings() -> None:
    assert settings({}).snapshot_memory == GIB + 6 * 1024 * (1 << 20)
    assert settings({SNAPSHOT_MAX_ENV: "10"}).snapshot_memory == GIB + 60 * (1 << 20)
    assert settings({SNAPSHOT_MEMORY_ENV: "300"}).snapshot_memory == 300 << 20
    assert settings({SNAPSHOT_MEMORY_ENV: "x"}).snapshot_memory == GIB + 6 * GIB
