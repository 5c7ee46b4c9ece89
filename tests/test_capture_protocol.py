"""Capture on demand without torch: the request/status files (`tb_plugin.capture.protocol`)
and the watch's polling rules (`tb_plugin.capture.watch`), on real files in a temp folder.
The watch's clock is injected, so the rate limit is pinned at its boundary on both sides; a
capture itself (torch) is tested end to end in tests/test_capture.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tb_plugin.capture import protocol
from tb_plugin.capture.watch import CaptureWatch
from tb_plugin.recorder import Recorder

POLL_S = 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch_in(run_dir: Path, clock: Clock) -> CaptureWatch:
    recorder = Recorder(run_dir.parent, run_dir.name, worker="w1")  # never started here
    return CaptureWatch(str(run_dir), worker=lambda: "w1", rank=lambda: None,
                        make_recorder=recorder._capture_recorder,
                        publish=lambda src, dest: None, poll_s=POLL_S, clock=clock)


def malformed_lines(caplog: pytest.LogCaptureFixture) -> int:
    return sum("ignoring the malformed request" in r.getMessage() for r in caplog.records)


def test_steps_are_bounded_on_both_sides() -> None:
    assert protocol.new_request(1).steps == 1
    assert protocol.new_request(protocol.MAX_STEPS).steps == protocol.MAX_STEPS
    for bad in (0, protocol.MAX_STEPS + 1):
        with pytest.raises(protocol.Malformed):
            protocol.new_request(bad)
    with pytest.raises(protocol.Malformed, match="unknown_option"):
        protocol.new_request(2, unknown_option=True)  # a typo when making one is an error
    newer = b'{"id": "n1", "steps": 2, "from_a_newer_version": 1}'  # when reading one, not
    assert protocol.decode(newer, protocol.CaptureRequest).steps == 2
    # ids become file names: only [A-Za-z0-9_-], 1 to 64 characters
    assert protocol.decode(b'{"id": "' + b"a" * 64 + b'", "steps": 1}', protocol.CaptureRequest)
    for bad_id in ("", "a" * 65, "../x", "a.b"):
        with pytest.raises(protocol.Malformed):
            protocol.decode(f'{{"id": "{bad_id}", "steps": 1}}'.encode(), protocol.CaptureRequest)


def test_request_round_trip_and_size_limit(tmp_path: Path) -> None:
    made = protocol.new_request(7, with_stack=True, memory_snapshot=True)
    protocol.write_request(str(tmp_path / "run"), made)
    path = tmp_path / "run" / protocol.REQUEST_NAME
    fs, _ = protocol.filesystem(str(path))
    assert protocol.read_control(fs, str(path), protocol.CaptureRequest) == made
    assert [p.name for p in (tmp_path / "run").iterdir()] == [protocol.REQUEST_NAME]  # no partial
    path.write_bytes(b" " * protocol.MAX_CONTROL_BYTES + b"{}")
    with pytest.raises(protocol.Malformed, match="over"):
        protocol.read_control(fs, str(path), protocol.CaptureRequest)


def test_summary_is_done_when_every_expected_worker_ended() -> None:
    def status(worker: str, state: str) -> protocol.CaptureStatus:
        return protocol.CaptureStatus(id="r", worker=worker, state=state, steps=2)

    assert not protocol.summary("r", [status("a", "written")], 2)["done"]
    assert not protocol.summary("r", [status("a", "written"), status("b", "recording")], 2)["done"]
    assert protocol.summary("r", [status("a", "written"), status("b", "failed")], 2)["done"]
    assert not protocol.summary("r", [], 0)["done"]  # nobody listened: never done


def test_targets_are_the_folders_with_a_listener_down_to_the_depth_bound(tmp_path: Path) -> None:
    deep = "/".join(f"d{i}" for i in range(protocol.MAX_TARGET_DEPTH))
    deeper = deep + "/d_extra"
    for run in ("top", deep, deeper):
        protocol.write_file(str(tmp_path / run), protocol.listen_name("w"),
                            protocol.Listener(worker="w", pid=1, since=0.0))
    (tmp_path / "no_listener").mkdir()
    assert protocol.capture_targets(str(tmp_path)) == {
        "top": str(tmp_path / "top"), deep: str(tmp_path / deep)}


def test_the_watch_polls_at_most_every_poll_s(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tb_plugin.capture.watch")
    clock, run_dir = Clock(), tmp_path / "run"
    watch = watch_in(run_dir, clock)
    watch.step()  # the first poll: the listener marker
    assert [p.name for p in run_dir.iterdir()] == [protocol.listen_name("w1")]
    (run_dir / protocol.REQUEST_NAME).write_text('{"id": "x", "steps": 0}')
    clock.now += POLL_S - 0.001
    watch.step()
    assert malformed_lines(caplog) == 0  # not due yet: no stat
    clock.now += 0.001
    watch.step()
    assert malformed_lines(caplog) == 1  # due: read, logged, ignored
    clock.now += POLL_S
    watch.step()
    assert malformed_lines(caplog) == 1  # the same version of the file is not read again
    (run_dir / protocol.REQUEST_NAME).write_text('{"id": "x", "steps": -1}')
    clock.now += POLL_S
    watch.step()
    assert malformed_lines(caplog) == 2
    assert not watch.recording and watch.finished == []
    watch.close()
    assert not (run_dir / protocol.listen_name("w1")).exists()


def test_a_request_there_before_the_job_listened_is_not_answered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tb_plugin.capture.watch")
    clock, run_dir = Clock(), tmp_path / "run"
    old = protocol.new_request(3)
    protocol.write_request(str(run_dir), old)
    watch = watch_in(run_dir, clock)
    watch.step()
    protocol.write_request(str(run_dir), protocol.decode(
        (run_dir / protocol.REQUEST_NAME).read_bytes() + b" ", protocol.CaptureRequest))
    clock.now += POLL_S
    watch.step()
    assert any(f"request {old.id} was answered already" in r.getMessage()
               for r in caplog.records)
    assert not watch.recording
    assert not list(run_dir.glob(f".torch-prof-capture.{old.id}.*"))
    watch.close()


def test_poll_s_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="poll_s"):
        watch_in_poll(tmp_path, 0.0)


def watch_in_poll(tmp_path: Path, poll_s: float) -> CaptureWatch:
    return CaptureWatch(str(tmp_path), worker=lambda: "w", rank=lambda: None,
                        make_recorder=lambda request: None, publish=lambda s, d: None,
                        poll_s=poll_s)
