"""Hostile allocator snapshots through a real TensorBoard: the memo bomb, records repeated by
reference, plain data that is not a snapshot and a pickle that needs more than its reader's
memory each answer 422 for that file only, in bounded server memory (the reader is a process of
its own), while `/runs` keeps answering; malformed records are skipped with a message; a
snapshot or export swapped for a link out of the logdir after the scan is refused at once,
not served from the memo or the cache until the next rescan."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ingest.hostile_pickles import malformed_snapshots, memo_bomb, repeated_segment
from tests.ingest.snapshots import hand_snapshot, write
from tests.support import SAMPLES

from .harness import Reply, TensorBoard, assert_error, running_tensorboard

WORKER = "vm_9710"
MALFORMED = malformed_snapshots()
#: The reader process's address space in this server: a 3 M-dict pickle needs more.
READER_MB = 320
#: How much the server's own peak RSS may grow while it answers every hostile file (it never
#: hosts a reader; the bomb alone took CPython's unpickler to 4.4 GB).
SERVER_GROWTH = 64 << 20


@pytest.fixture(scope="module")
def hostile_tb(server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[TensorBoard, Path]]:
    root = tmp_path_factory.mktemp("hostile")
    run = root / "logdir" / "snap"
    run.mkdir(parents=True)
    for source in (SAMPLES / "cnn_bs32").glob("*.json.gz"):  # traces and their exports
        shutil.copy(source, run / source.name)
    write(run / "good.pickle", hand_snapshot())
    (run / "bomb.pickle").write_bytes(memo_bomb())
    (run / "repeat.pickle").write_bytes(repeated_segment(copies=3000, blocks=3000))
    (run / "dicts.pickle").write_bytes(b"\x80\x04](" + b"}" * 3_000_000 + b"e.")
    data, _ = MALFORMED["size-a-string"]
    write(run / "odd.pickle", data)
    for name, (data, _) in MALFORMED.items():
        write(run / f"m-{name}.pickle", data)
    write(run / "list.pickle", [1, 2, 3])
    outside = root / "outside"
    outside.mkdir()
    write(outside / "secret.pickle", hand_snapshot())
    env = {**server_env, "TORCH_PROF_SNAPSHOT_MEMORY_MB": str(READER_MB)}
    with running_tensorboard(root / "logdir", root / "tb.log", env, "--load_fast=true") as tb:
        tb.wait_loaded()
        yield tb, root


def peak_rss(tb: TensorBoard) -> int:
    status = Path(f"/proc/{tb.process.pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    assert match, status
    return int(match.group(1)) << 10


def snapshot(tb: TensorBoard, name: str) -> Reply:
    return tb.get("memory/snapshot", {"run": "snap", "snapshot": name})


def test_hostile_snapshots_cost_their_file_only(hostile_tb: tuple[TensorBoard, Path]) -> None:
    tb, _ = hostile_tb
    assert snapshot(tb, "good.pickle").status == 200  # the server has built one view
    before = peak_rss(tb)
    replies: dict[str, Reply] = {}

    def ask(name: str) -> None:
        replies[name] = snapshot(tb, name)

    askers = [threading.Thread(target=ask, args=(name,))
              for name in ("dicts.pickle", "bomb.pickle", "repeat.pickle", "list.pickle")]
    for asker in askers:
        asker.start()
    answered = 0
    while any(asker.is_alive() for asker in askers):  # the server answers meanwhile
        assert tb.get("runs").status == 200
        answered += 1
    for asker in askers:
        asker.join()
    assert answered >= 1
    expected = {
        "bomb.pickle": "bomb.pickle: not a readable pickle: memo index 268435456 is beyond",
        "repeat.pickle": "repeat.pickle: refused: the snapshot repeats the same records",
        "dicts.pickle": f"dicts.pickle: refused: it needs more than the {READER_MB} MiB",
        "list.pickle": "list.pickle: not a memory snapshot: expected a dict",
    }
    for name, message in expected.items():
        assert assert_error(replies[name], 422)["message"].startswith(message), name
    assert peak_rss(tb) - before < SERVER_GROWTH
    odd = snapshot(tb, "odd.pickle")
    assert odd.status == 200, odd.body[:300]
    assert any("Skipped 1 malformed snapshot record" in m for m in odd.json()["messages"])
    # everything else in the run is unaffected
    assert snapshot(tb, "good.pickle").json()["peak"]["bytes"] == (9 << 20) + (512 << 10)
    for route in ("overview", "memory", "memory/timeline"):
        reply = tb.get(route, {"run": "snap", "worker": WORKER, "span": "2"})
        assert reply.status == 200, (route, reply.body[:200])


def test_files_swapped_for_links_out_of_the_logdir_are_refused_at_once(
        hostile_tb: tuple[TensorBoard, Path]) -> None:
    tb, root = hostile_tb
    run, outside = root / "logdir" / "snap", root / "outside"
    params = {"run": "snap", "worker": WORKER, "span": "2"}
    assert snapshot(tb, "good.pickle").status == 200  # memoised, and in the cache
    assert tb.get("memory/timeline", params).status == 200
    export = sorted(run.glob("*.raw.json.gz"))[1]  # span 2's, named after its trace
    shutil.copy(export, outside / "secret.raw.json.gz")
    for path, target in ((run / "good.pickle", outside / "secret.pickle"),
                         (export, outside / "secret.raw.json.gz")):
        path.unlink()
        path.symlink_to(target)  # same size, and no rescan in between
    error = assert_error(snapshot(tb, "good.pickle"), 422)
    assert error["message"].startswith("good.pickle: refused: the file's real path is outside")
    error = assert_error(tb.get("memory/timeline", params), 422)
    assert "refused: the file's real path is outside the logdir" in error["message"]
    (run / "list.pickle").unlink()  # gone since the scan: that file's error only
    error = assert_error(snapshot(tb, "list.pickle"), 422)
    assert error["message"].startswith("list.pickle: refused: [Errno 2] No such file")


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_plain_data_never_answers_500(hostile_tb: tuple[TensorBoard, Path],
                                                name: str) -> None:
    """Each malformed snapshot, on its own clock and on the trace's: 200 with its skipped
    records counted, or 422 when the whole file is not a snapshot."""
    tb, _ = hostile_tb
    _, skipped = MALFORMED[name]
    for extra in ({}, {"worker": WORKER, "span": "2"}):
        reply = tb.get("memory/snapshot", {"run": "snap", "snapshot": f"m-{name}.pickle",
                                           **extra})
        if skipped is None:
            error = assert_error(reply, 422)
            assert error["message"].startswith(f"m-{name}.pickle: not a memory snapshot")
            continue
        assert reply.status == 200, reply.body[:300]
        messages = reply.json()["messages"]
        assert any(f"Skipped {skipped} malformed" in m for m in messages) == bool(skipped)
