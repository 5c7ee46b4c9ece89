"""Hostile allocator snapshots: each ends as a per-file error or as a snapshot whose malformed
records are skipped and counted, in bounded memory, and the caller is never the process that
allocates: the memo bomb (9 bytes), records repeated by reference, wrong types and values in
the plain data, a snapshot needing more memory than its reader may use, a FIFO, a file swapped
for a link out of the logdir. Memory is measured as the peak RSS of a subprocess and its
children (`getrusage`)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_plugin.discovery import discover_runs
from tb_plugin.ingest.snapshot import MAX_DEVICE, MAX_SIZE, SnapshotError, read_snapshot, to_columns
from tb_plugin.load import SNAPSHOT_READERS, load_snapshot, read_snapshot_isolated
from tb_plugin.settings import PARSE_DEADLINE_ENV, SNAPSHOT_MEMORY_ENV
from tb_plugin.storage import file_ref, filesystem, open_ref
from tb_plugin.views.registry import build_view
from tb_plugin.workers import WORKER_NAME
from tests.ingest.hostile_pickles import malformed_snapshots, memo_bomb, repeated_segment
from tests.ingest.snapshots import MIB, hand_snapshot, write

REPO = Path(__file__).resolve().parents[2]
MALFORMED = malformed_snapshots()
#: The bound the issue sets for the memo bomb: its whole run, children included.
BOMB_MEMORY = 600 << 20

#: Runs in a subprocess: load the snapshot at argv[1] as the server does, print the outcome and
#: the peak RSS (bytes) of this process (VmHWM: `ru_maxrss` would count the pytest process it
#: was forked from, which Linux keeps across exec) and of its reaped children (the reader
#: process; their `ru_maxrss` may include this small process's at their fork: an upper bound).
_MEASURE = """
import json, re, resource, sys
from tb_plugin.ingest.snapshot import SnapshotError
from tb_plugin.load import load_snapshot
try:
    load_snapshot(sys.argv[1], use_cache=False)
    outcome = "read"
except SnapshotError as exc:
    outcome = str(exc)
status = open("/proc/self/status").read()
peak = {"caller": int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024,
        "reader": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
print(json.dumps({"outcome": outcome, **peak}))
"""


def measure(path: Path, **env: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True,
                            text=True, cwd=REPO, timeout=300, env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_memo_bomb_is_a_per_file_error_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "bomb.pickle"
    path.write_bytes(memo_bomb())
    seen = measure(path)
    assert seen["outcome"].startswith("not a readable pickle: memo index 268435456 is beyond")
    assert seen["caller"] < BOMB_MEMORY and seen["reader"] < BOMB_MEMORY
    # and it is a bomb: CPython's own unpickler cannot read it in that much address space
    probe = ("import pickle, resource, sys; "
             f"resource.setrlimit(resource.RLIMIT_AS, ({BOMB_MEMORY}, {BOMB_MEMORY})); "
             "pickle.loads(open(sys.argv[1], 'rb').read())")
    native = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True,
                            text=True, timeout=300)
    assert native.returncode != 0 and "MemoryError" in native.stderr


def test_a_snapshot_needing_more_than_its_reader_may_use_is_refused(tmp_path: Path) -> None:
    """3 M empty dicts in a 3 MB plain pickle: about 250 MB once built. With a 1 GiB reader
    they are read (and are not a snapshot); with 320 MiB the reader runs out, and the caller
    neither grows nor fails otherwise."""
    path = tmp_path / "dicts.pickle"
    path.write_bytes(b"\x80\x04](" + b"}" * 3_000_000 + b"e.")
    roomy = measure(path, **{SNAPSHOT_MEMORY_ENV: "1024"})
    assert roomy["outcome"].startswith("not a memory snapshot: expected a dict")
    assert roomy["reader"] > 250 << 20  # the reader process built them ...
    tight = measure(path, **{SNAPSHOT_MEMORY_ENV: "320"})
    assert tight["outcome"] == ("refused: it needs more than the 320 MiB of memory its reader "
                                f"may use ({SNAPSHOT_MEMORY_ENV})")
    for seen in (roomy, tight):  # ... never the caller
        assert seen["caller"] < 200 << 20


def test_records_repeated_by_reference_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "repeat.pickle"
    path.write_bytes(repeated_segment(copies=3000, blocks=3000))  # 9 M block records
    assert path.stat().st_size < 100_000
    with pytest.raises(SnapshotError, match="repeats the same records by reference"):
        read_snapshot(path)


def test_the_record_limit_is_exact() -> None:
    data = hand_snapshot()  # 7 entries, 2 segments, 6 blocks: 15 records
    assert len(to_columns(data, max_rows=15).blocks["size"]) == 6
    with pytest.raises(SnapshotError, match="repeats the same records"):
        to_columns(data, max_rows=14)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_plain_data_costs_its_record_or_is_a_clear_error(tmp_path: Path,
                                                                   name: str) -> None:
    data, skipped = MALFORMED[name]
    path = write(tmp_path / "s.pickle", data)
    if skipped is None:
        with pytest.raises(SnapshotError, match="^not a memory snapshot: expected a dict"):
            read_snapshot(path)
        return
    snap = read_snapshot(path)
    assert snap.skipped == skipped
    payload = build_view(None, "memory_snapshot", snap)
    msgspec.json.encode(payload)  # the server's and the CLI's encoding
    if skipped:
        assert any(f"Skipped {skipped} malformed" in m for m in payload["messages"])


@pytest.mark.parametrize(("field", "value", "kept"), [
    ("size", 0, True), ("size", -1, False), ("size", MAX_SIZE - 1, True),
    ("size", MAX_SIZE, False), ("size", True, False), ("size", None, True),
    ("addr", 0, True), ("addr", -1, False),
])
def test_entry_values_at_their_bounds(tmp_path: Path, field: str, value: Any,
                                      kept: bool) -> None:
    data = hand_snapshot()
    data["device_traces"][0][5][field] = value  # the last alloc, of C
    snap = read_snapshot(write(tmp_path / "s.pickle", data))
    assert snap.skipped == (0 if kept else 1)
    assert len(snap.entries["size"]) == (7 if kept else 6)


@pytest.mark.parametrize(("value", "kept"), [(0, True), (MAX_DEVICE - 1, True),
                                             (MAX_DEVICE, False), (-1, False), ("0", False)])
def test_segment_devices_at_their_bounds(tmp_path: Path, value: Any, kept: bool) -> None:
    data = hand_snapshot()
    data["segments"][0]["device"] = value
    snap = read_snapshot(write(tmp_path / "s.pickle", data))
    assert snap.segments["device"].tolist() == ([value, 0] if kept else [0])
    assert len(snap.blocks["size"]) == (6 if kept else 4)  # its 2 blocks go with it


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "dump_snapshot.pickle"
    os.mkfifo(fifo)
    # in a subprocess with a deadline, so that a regression hangs nothing but it
    probe = ("import sys\nfrom tb_plugin.ingest.snapshot import SnapshotError, read_snapshot\n"
             "try:\n    read_snapshot(sys.argv[1])\nexcept SnapshotError as exc:\n"
             "    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(fifo)], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: ") and "is not a regular file" in result.stdout


def test_a_snapshot_swapped_for_a_link_out_of_the_logdir_is_refused(tmp_path: Path) -> None:
    logdir, outside = tmp_path / "logdir", tmp_path / "outside"
    (logdir / "run").mkdir(parents=True)
    outside.mkdir()
    inside_path = write(logdir / "run" / "dump_snapshot.pickle", hand_snapshot())
    secret = write(outside / "secret.pickle", hand_snapshot())
    [run] = discover_runs(str(logdir))
    [ref] = run.memory_snapshots
    assert len(load_snapshot(ref, use_cache=False).entries["size"]) == 7
    inside_path.unlink()
    inside_path.symlink_to(secret)  # after the scan: the next read must see it
    swapped = file_ref(*filesystem(str(inside_path)), root=ref.root)
    for target in (ref, swapped):
        with pytest.raises(SnapshotError, match="real path is outside the logdir"):
            load_snapshot(target, use_cache=False)
    assert secret.stat().st_size > MIB // 1024  # still there, never read through the link
    assert pickle.loads(secret.read_bytes())["segments"]


def reader_processes() -> int:
    """This process's live snapshot reader children (workers.WORKER_NAME in their command)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and command.endswith(WORKER_NAME.encode() + b"\0"):
            count += 1
    return count


def test_at_most_two_readers_run_at_a_time(tmp_path: Path) -> None:
    """Four reads at once of a slow but small pickle (500 k None-then-POP pairs): two reader
    processes run, the other reads wait for them."""
    path = tmp_path / "slow.pickle"
    path.write_bytes(b"\x80\x04" + b"N0" * 500_000 + b"N.")
    errors: list[str] = []

    def read() -> None:
        try:
            read_snapshot_isolated(open_ref(str(path)))
        except SnapshotError as exc:
            errors.append(str(exc))

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    seen = set()
    while any(reader.is_alive() for reader in readers):
        seen.add(reader_processes())
    for reader in readers:
        reader.join()
    assert errors == ["not a memory snapshot: expected a dict with 'segments' and "
                      "'device_traces' lists, found a NoneType"] * 4
    assert max(seen) == SNAPSHOT_READERS == 2


def test_a_read_past_the_deadline_is_killed_and_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """20 M None-then-POP pairs (40 MB, tens of seconds of reading) under a 1 s deadline."""
    path = tmp_path / "slow.pickle"
    path.write_bytes(b"\x80\x04" + b"N0" * 20_000_000 + b"N.")
    monkeypatch.setenv(PARSE_DEADLINE_ENV, "1")
    with pytest.raises(SnapshotError) as error:
        read_snapshot_isolated(open_ref(str(path)))
    assert str(error.value) == f"refused: it took longer than 1 s to read ({PARSE_DEADLINE_ENV})"
    assert reader_processes() == 0  # killed, not left reading
