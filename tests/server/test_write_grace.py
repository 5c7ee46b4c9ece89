"""A broken file is reported at once; only a file that may still be written is waited for.

`ParseStatus.cut_off` (the parse stopped inside a JSON value) and `FileState.growing` (a scan saw
the file with another size) decide; hand-written bytes are the oracle for which is which.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import pytest

from tb_plugin.ingest import LoadState
from tb_plugin.load import load_trace
from tb_plugin.server.filestate import FileState
from tb_plugin.storage import FileRef
from tests.server.harness import TensorBoard, write_bytes

EVENT = b'{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}'


@pytest.mark.parametrize(("data", "state", "cut_off"), [
    (b"", LoadState.ERROR, True),  # created, nothing written yet
    (b'{"schemaVersion": 1, "traceEv', LoadState.ERROR, True),  # header cut mid-token
    (b'{"traceEvents": [' + EVENT + b', {"ph": "X", "na', LoadState.TRUNCATED, True),
    (b'{"traceEvents": [' + EVENT + b",", LoadState.TRUNCATED, True),  # cut between events
    (b'{"traceEvents": [' + EVENT, LoadState.TRUNCATED, True),  # the array not closed yet
    (b'{"schemaVersion": 1 "deviceProperties": []}', LoadState.ERROR, False),  # invalid
    (b"this is not json", LoadState.ERROR, False),
    (b'{"traceEvents": [' + EVENT + b", ]]}garbage", LoadState.OK, False),  # tolerated
    (b'{"traceEvents": [' + EVENT + b', {"ph": "X" "name"', LoadState.TRUNCATED, False),
])
def test_cut_off_or_broken(tmp_path: Path, data: bytes, state: str, cut_off: bool) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(data)
    status = load_trace(path, use_cache=False).status
    assert (status.state, status.cut_off) == (state, cut_off), status.messages


def _state(cut_off: bool, growing: bool, age_s: float, now: float) -> FileState:
    ref = FileRef(None, "/x/w.pt.trace.json", 10, str(now - age_s))
    return FileState(ref, "id", state=LoadState.ERROR, messages=["bad"], parsed=True,
                     cut_off=cut_off, growing=growing)


def test_only_a_file_that_may_grow_is_waited_for() -> None:
    now = time.time()
    assert _state(cut_off=False, growing=False, age_s=1, now=now).report(now) == (
        "error", ["bad"])  # freshly copied, ends in invalid JSON: broken at once
    state, messages = _state(cut_off=True, growing=False, age_s=1, now=now).report(now)
    assert state == "loading" and messages[1:] == ["bad"]
    state, messages = _state(cut_off=False, growing=True, age_s=1, now=now).report(now)
    assert state == "loading" and "still being written" in messages[0]
    assert _state(cut_off=True, growing=True, age_s=600, now=now).report(now) == (
        "error", ["bad"])  # untouched for ten minutes: whatever it is, it is final


def test_freshly_copied_broken_file_is_an_error_at_once(tb: TensorBoard, logdir: Path) -> None:
    path = logdir / "fresh_broken" / "w.pt.trace.json"
    write_bytes(path, b'{"schemaVersion": 1 "deviceProperties": []}', mtime=None)  # now
    params = {"run": "fresh_broken", "worker": "w", "span": "default"}

    def parsed() -> Optional[dict[str, Any]]:
        if "fresh_broken" not in {r["name"] for r in tb.runs()["runs"]}:
            return None
        status = tb.get("status", params).json()
        return status if status["progress"] == 1 else None

    status = tb.wait_for("the broken file to be parsed", parsed, timeout=40, interval=0.5)
    assert status["state"] == "error", status  # not "loading" for 30 s: it never will be good
    assert not any("modified" in m for m in status["messages"]), status
