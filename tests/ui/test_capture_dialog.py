"""The "Capture profile" dialog in chromium against a real TensorBoard started with
TORCH_PROF_ALLOW_CAPTURE=1 and a real CPU training job listening in the logdir: the dialog lists
the listening run, a capture asked there is answered (the worker's line says written, with the
file the job wrote), and the new run appears in the run picker without a reload. Screenshots of
the form and of the answer (tests/_artifacts/capture_*.png)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import import_torch
from tests.support.capture_job import running_job

from .harness import SAMPLES, running_tensorboard
from .pages import TIMEOUT_MS, plugin_frame, shot


def test_capture_dialog_asks_the_job_and_shows_its_answer(
        page: Any, artifacts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import_torch()
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "cnn_bs32", logdir / "cnn_bs32")
    monkeypatch.setenv("TORCH_PROF_ALLOW_CAPTURE", "1")
    with running_job(tmp_path, logdir, "job") as job, \
            running_tensorboard(tmp_path, logdir, {}, repo_first=True) as tb:
        (marker,) = job.wait_listening()
        worker = json.loads(marker.read_text())["worker"]
        frame = plugin_frame(page, tb)
        frame.click("[data-testid=capture-open]")
        dialog = frame.wait_for_selector("[data-testid=capture-dialog][open]", timeout=TIMEOUT_MS)
        frame.wait_for_selector("[data-testid=capture-run] option[value=job]", state="attached",
                                timeout=TIMEOUT_MS)
        assert frame.input_value("[data-testid=capture-run]") == "job"
        assert frame.locator("[data-testid=capture-message]").count() == 0  # enabled, listening
        frame.fill("[data-testid=capture-steps]", "0")
        assert frame.is_disabled("[data-testid=capture-submit]")  # 1 to 1000 only
        frame.fill("[data-testid=capture-steps]", "2")
        frame.check("[data-testid=capture-stack]")
        assert frame.is_enabled("[data-testid=capture-submit]")
        shot(page, artifacts, "capture_dialog_form")

        frame.click("[data-testid=capture-submit]")
        written = frame.wait_for_selector("[data-testid=capture-progress] li[data-state=written]",
                                          timeout=120_000)
        line = written.inner_text()
        assert line.startswith(f"{worker}: written: {worker}.")
        trace = line.split("written: ", 1)[1]
        assert (job.run_dir / trace).is_file()
        request = json.loads((job.run_dir / ".torch-prof-capture.request").read_text())
        assert (request["steps"], request["with_stack"]) == (2, True)
        assert "answered" in dialog.inner_text()
        shot(page, artifacts, "capture_dialog_written")

        frame.click("[data-testid=capture-close]")
        frame.wait_for_selector("[data-testid=capture-dialog]", state="detached",
                                timeout=TIMEOUT_MS)
        # the captured span shows up live: the run picker gains the job's run
        frame.wait_for_selector("[data-testid=run-select] option[value=job]", state="attached",
                                timeout=120_000)
        shot(page, artifacts, "capture_run_listed")


def test_capture_dialog_says_when_capture_is_disabled(
        page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "cnn_bs32", logdir / "cnn_bs32")
    monkeypatch.delenv("TORCH_PROF_ALLOW_CAPTURE", raising=False)
    with running_tensorboard(tmp_path, logdir, {}, repo_first=True) as tb:
        frame = plugin_frame(page, tb)
        frame.click("[data-testid=capture-open]")
        message = frame.wait_for_selector("[data-testid=capture-message]", timeout=TIMEOUT_MS)
        assert "TORCH_PROF_ALLOW_CAPTURE=1" in message.inner_text()
        assert frame.is_disabled("[data-testid=capture-submit]")
