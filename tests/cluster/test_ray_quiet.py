"""Issue 28: Ray's "SIGTERM handler is not set" warning (printed on every `--cluster` run:
the executor connects from a helper thread on purpose) is dropped; Ray's other messages pass."""

from __future__ import annotations

import logging

import pytest

from tb_plugin.executors import OFF_MAIN_THREAD_NOTE, RAY_WORKER_LOG

NOTE = "SIGTERM handler is not set because current thread is not the main thread."


def test_only_the_off_main_thread_note_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    RAY_WORKER_LOG.addFilter(OFF_MAIN_THREAD_NOTE)
    with caplog.at_level(logging.WARNING, logger=RAY_WORKER_LOG.name):
        RAY_WORKER_LOG.warning(NOTE)
        RAY_WORKER_LOG.warning("Token authentication is enabled for this Ray cluster.")
        RAY_WORKER_LOG.warning("Not a SIGTERM handler is not set note")
    assert [r.getMessage() for r in caplog.records] == [
        "Token authentication is enabled for this Ray cluster.",
        "Not a SIGTERM handler is not set note"]
    assert RAY_WORKER_LOG.name == "ray._private.worker"  # the logger Ray warns on
