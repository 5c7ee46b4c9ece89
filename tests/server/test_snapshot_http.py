"""`/memory/snapshot` through a real TensorBoard: a snapshot beside the traces shows on the
span's clock; a malicious pickle in the same run is refused with a clear 422 (and the file it
would write never appears) while everything else in the run keeps working; a run holding only
a snapshot offers the Memory view."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ingest.snapshots import evil_pickles, hand_snapshot, into_trace_period, write
from tests.support import SAMPLES

from .harness import TensorBoard, assert_error, running_tensorboard

WORKER = "vm_9710"


@pytest.fixture(scope="module")
def snap_tb(server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[TensorBoard, Path]]:
    root = tmp_path_factory.mktemp("snapshots")
    logdir = root / "logdir"
    run = logdir / "snap"
    run.mkdir(parents=True)
    traces = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
    for source in (SAMPLES / "cnn_bs32").glob("*.json.gz"):  # traces and their exports
        shutil.copy(source, run / source.name)
    paired = traces[1].name.replace(".pt.trace.json.gz", ".snapshot.pickle")
    write(run / paired, into_trace_period(hand_snapshot(), traces[1]))
    target = root / "pwned"
    (run / "evil.pickle").write_bytes(evil_pickles(target)["reduce-protocol-4"])
    (logdir / "only").mkdir()
    write(logdir / "only" / "oom.pickle", hand_snapshot())
    with running_tensorboard(logdir, root / "tb.log", server_env, "--load_fast=true") as tb:
        tb.wait_loaded()
        yield tb, target


def test_a_snapshot_beside_the_trace_is_on_its_clock(snap_tb: tuple[TensorBoard, Path]) -> None:
    tb, _ = snap_tb
    views = {r["name"]: r["views"] for r in tb.runs()["runs"]}
    assert "Memory" in views["snap"] and views["only"] == ["Memory"]
    assert tb.get("workers", {"run": "snap", "view": "Memory"}).json() == [WORKER]
    reply = tb.get("memory/snapshot", {"run": "snap", "worker": WORKER, "span": "2"})
    assert reply.status == 200, reply.body[:300]
    payload = reply.json()
    assert payload["clock"] == "trace" and payload["name"].endswith(".snapshot.pickle")
    assert payload["snapshots"] == sorted(["evil.pickle", payload["name"]])
    assert payload["peak"]["bytes"] == (9 << 20) + (512 << 10)
    csv = tb.get("memory/snapshot", {"run": "snap", "worker": WORKER, "span": "2",
                                     "format": "csv"})
    assert csv.status == 200 and csv.body.decode().splitlines()[0] == "t,allocated,reserved"
    alone = tb.get("memory/snapshot", {"run": "only"}).json()
    assert alone["clock"] == "snapshot" and alone["name"] == "oom.pickle"


def test_a_malicious_pickle_is_refused_and_nothing_else_is_affected(
        snap_tb: tuple[TensorBoard, Path]) -> None:
    tb, target = snap_tb
    params = {"run": "snap", "worker": WORKER, "span": "2", "snapshot": "evil.pickle"}
    error = assert_error(tb.get("memory/snapshot", params), 422)
    assert error["message"].startswith("evil.pickle: refused: the pickle refers to io.open")
    assert "nothing from the file was run" in error["message"]
    assert not target.exists()
    # span 1 has no snapshot named after it and none of its period: the first readable one
    # (evil.pickle is passed over), on its own clock
    other = tb.get("memory/snapshot", {"run": "snap", "worker": WORKER, "span": "1"}).json()
    assert other["name"].endswith(".snapshot.pickle") and other["clock"] == "snapshot"
    assert not target.exists()
    for route in ("memory", "overview", "memory/timeline"):
        reply = tb.get(route, {"run": "snap", "worker": WORKER, "span": "2"})
        assert reply.status == 200, (route, reply.body[:200])
    assert tb.get("memory/snapshot", {"run": "snap", "worker": WORKER, "span": "2"}).status == 200
    states = {f["state"] for r in tb.runs()["runs"] if r["name"] == "snap"
              for w in r["workers"] for f in w["spans"]}
    assert states == {"ok"}
    assert "refused" in tb.log_tail(200)  # and the log says it too


def test_bad_snapshot_requests(snap_tb: tuple[TensorBoard, Path]) -> None:
    tb, _ = snap_tb
    assert_error(tb.get("memory/snapshot", {"run": "snap", "worker": WORKER}), 400)
    assert_error(tb.get("memory/snapshot", {"run": "snap", "snapshot": "nope.pickle"}), 404)
    assert_error(tb.get("memory/snapshot", {"run": "only", "device": "GPU9"}), 404)
    assert_error(tb.get("memory/snapshot", {"run": "only", "start": "5", "end": "1"}), 400)
