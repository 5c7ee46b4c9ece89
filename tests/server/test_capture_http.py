"""Capture on demand over HTTP, end to end: a real CPU training job listening
(`tests/support/capture_job.py`), a real TensorBoard started with TORCH_PROF_ALLOW_CAPTURE=1
whose `POST /capture` asks it for a capture, `/capture/status` until written, then the new span
appears in `/runs` and its views load. A second TensorBoard on the same logdir without the flag
refuses (403) and writes nothing. Synchronisation is on observable states (the statuses, the
listing), never on sleeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.capture import protocol
from tests.support import import_torch
from tests.support.capture_job import Job, running_job

from .harness import TensorBoard, assert_error, running_tensorboard

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    import_torch()
    cwd = tmp_path_factory.mktemp("http-job")
    with running_job(cwd, cwd / "logs", "job") as running:
        running.wait_listening()
        yield running


@pytest.fixture(scope="module")
def env(server_env: dict[str, str]) -> dict[str, str]:
    return {**server_env, "TORCH_PROF_ALLOW_CAPTURE": "1"}


@pytest.fixture(scope="module")
def board(job: Job, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[TensorBoard]:
    log = tmp_path_factory.mktemp("tb-capture") / "tensorboard.log"
    with running_tensorboard(job.run_dir.parent, log, env, "--load_fast=true") as tb:
        yield tb


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def test_targets_list_the_listening_run(board: TensorBoard, job: Job) -> None:
    reply = board.get("capture/targets")
    assert reply.status == 200
    worker = json.loads(job.listeners()[0].read_text())["worker"]
    assert reply.json() == {"enabled": True, "message": "",
                            "runs": [{"run": "job", "workers": [worker]}]}


def test_capture_through_the_endpoint_appears_and_its_views_load(
        board: TensorBoard, job: Job) -> None:
    reply = board.post("capture", body(run="job", steps=2, with_stack=True))
    assert reply.status == 200, reply.body
    accepted = reply.json()
    assert (accepted["run"], accepted["expected"]) == ("job", 1)
    request = protocol.decode((job.run_dir / protocol.REQUEST_NAME).read_bytes(),
                              protocol.CaptureRequest)
    assert (request.id, request.steps, request.with_stack) == (accepted["id"], 2, True)

    def done() -> Any:
        progress = board.get("capture/status", {"id": accepted["id"]}).json()
        return progress if progress["done"] else None

    progress = board.wait_for("the capture's status", done, timeout=120)
    (status,) = progress["workers"]
    assert (status["state"], status["step"], status["steps"]) == ("written", 2, 2)
    trace = status["files"][0]
    assert (job.run_dir / trace).is_file()

    def span_listed() -> Any:
        runs = {run["name"]: run for run in board.runs()["runs"]}
        workers = runs.get("job", {}).get("workers", [])
        return workers[0]["spans"] if workers else None

    spans = board.wait_for("the captured span in /runs", span_listed, timeout=120)
    assert len(spans) == 1
    params = {"run": "job", "worker": status["worker"], "span": spans[0]["span"]}

    def loaded(route: str) -> Any:
        reply = board.get(route, params)
        return reply if reply.status == 200 else None

    operators = board.wait_for("the operator view", lambda: loaded("operators"), timeout=120)
    names = {row["name"] for row in operators.json()["rows"]}
    assert "aten::linear" in names
    overview = loaded("overview")
    assert overview is not None and overview.json()


def test_bad_requests_are_clear_errors(board: TensorBoard, job: Job) -> None:
    before = (job.run_dir / protocol.REQUEST_NAME).read_bytes() \
        if (job.run_dir / protocol.REQUEST_NAME).exists() else b""
    assert_error(board.post("capture", body(run="nope", steps=2)), 404)
    for bad in (body(run="job", steps=0), body(run="job", steps=protocol.MAX_STEPS + 1),
                body(run="job", steps=2, extra=1), b"{not json", body(steps=2)):
        assert_error(board.post("capture", bad), 400)
    assert_error(board.post("capture", body(run="job", steps=2), "text/plain"), 400)
    assert_error(board.post("capture", b"x" * 5000), 400)
    assert_error(board.get("capture"), 405)
    assert_error(board.get("capture/status", {"id": "unknown"}), 404)
    after = (job.run_dir / protocol.REQUEST_NAME).read_bytes() \
        if (job.run_dir / protocol.REQUEST_NAME).exists() else b""
    assert after == before  # nothing was written by a refused request


def test_without_the_flag_the_endpoint_refuses(job: Job, server_env: dict[str, str],
                                               tmp_path: Path) -> None:
    request_file = job.run_dir / protocol.REQUEST_NAME
    before = request_file.read_bytes() if request_file.exists() else b""
    with running_tensorboard(job.run_dir.parent, tmp_path / "tb.log", server_env,
                             "--load_fast=true") as tb:
        error = assert_error(tb.post("capture", body(run="job", steps=2)), 403)
        assert "TORCH_PROF_ALLOW_CAPTURE=1" in error["message"]
        targets = tb.get("capture/targets").json()
        assert targets["enabled"] is False
        assert "TORCH_PROF_ALLOW_CAPTURE=1" in targets["message"]
    assert (request_file.read_bytes() if request_file.exists() else b"") == before
