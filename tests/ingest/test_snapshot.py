"""Allocator snapshot reader: plain data only (a pickle that would run code is refused and runs
nothing), bounded size, columns and interned stacks, gzip, the cache, discovery beside traces.

No real CUDA snapshot was available (no GPU here): the fixtures follow the format of torch's
`_snapshot()` (see tests/ingest/snapshots.py), and one is written by PyTorch's own
`torch.cuda._memory_viz._profile_to_snapshot` from a CPU profile."""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.discovery import discover_runs
from tb_plugin.ingest.snapshot import ACTIONS, BLOCK_STATES, SnapshotError, read_snapshot
from tb_plugin.load import load_snapshot
from tests.ingest.snapshots import KIB, MIB, PRE, SEG, T0, evil_pickles, hand_snapshot, write
from tests.support import SAMPLES, import_torch


@pytest.mark.parametrize("kind", ["reduce-protocol-0", "reduce-protocol-2", "reduce-protocol-4",
                                  "reduce-protocol-5", "os.system", "global-opcode",
                                  "persistent-id"])
def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path: Path,
                                                                   kind: str) -> None:
    target = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(evil_pickles(target)[kind])
    with pytest.raises(SnapshotError, match=r"^refused: .*(nothing from the file was run)"):
        read_snapshot(path)
    assert not target.exists()
    # and the real thing would have: the payload is live, not a dud
    if kind.startswith("reduce") or kind == "global-opcode":
        pickle.loads(path.read_bytes())
        assert target.exists()


def test_the_refusal_names_what_the_pickle_refers_to(tmp_path: Path) -> None:
    path = tmp_path / "evil.pickle"
    path.write_bytes(evil_pickles(tmp_path / "x")["os.system"])
    with pytest.raises(SnapshotError) as error:
        read_snapshot(path)
    assert "posix.system" in str(error.value) or "os.system" in str(error.value)
    assert "only dicts, lists, tuples, strings, numbers, booleans and None" in str(error.value)


def test_an_oversized_snapshot_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "big.pickle", hand_snapshot())
    size = path.stat().st_size
    with pytest.raises(SnapshotError, match="over"):
        read_snapshot(path, max_bytes=size - 1)
    gz = tmp_path / "big.pickle.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert gz.stat().st_size < size  # the limit counts decompressed bytes
    with pytest.raises(SnapshotError, match="over"):
        read_snapshot(gz, max_bytes=size - 1)
    assert len(read_snapshot(gz, max_bytes=size).entries["action"]) == 7


@pytest.mark.parametrize(("data", "message"), [
    (pickle.dumps([1, 2, 3]), "not a memory snapshot: .* found a list"),
    (pickle.dumps({"segments": []}), "not a memory snapshot"),
    (pickle.dumps(hand_snapshot())[:-40], "not a readable pickle"),
    (b"", "not a readable pickle"),
    (b"\x1f\x8bnot gzip at all", "not a readable pickle"),
    (b'{"traceEvents": []}', "not a readable pickle"),
])
def test_what_is_not_a_snapshot_gets_a_clear_error(tmp_path: Path, data: bytes,
                                                  message: str) -> None:
    path = tmp_path / "x.pickle"
    path.write_bytes(data)
    with pytest.raises(SnapshotError, match=message):
        read_snapshot(path)


def test_columns_of_the_hand_snapshot(tmp_path: Path) -> None:
    snap = read_snapshot(write(tmp_path / "s.pickle", hand_snapshot()))
    e = snap.entries
    assert [ACTIONS[a] for a in e["action"]] == [
        "segment_alloc", "alloc", "alloc", "free_requested", "free_completed", "alloc", "oom"]
    assert e["size"].tolist() == [2 * MIB, MIB, 512 * KIB, MIB, MIB, 256 * KIB, 64 * MIB]
    assert e["addr"][:6].tolist() == [SEG, SEG, SEG + MIB, SEG, SEG, SEG]
    assert (e["time_us"] - T0).tolist() == [10, 11, 12, 13, 14, 15, 16]
    assert e["device_free"][-1] == 3 * MIB and snap.has_time
    # one stored stack per distinct stack: make_a (5 uses), make_b, make_c, load_weights
    assert len(snap.stacks) == 4
    assert e["stack"][0] == e["stack"][1] == e["stack"][3] == e["stack"][4] != e["stack"][2]
    assert e["stack"][-1] == -1  # the OOM has no frames
    assert snap.segments["address"].tolist() == [PRE, SEG]
    assert snap.segments["total_size"].tolist() == [20 * MIB, 2 * MIB]
    assert [BLOCK_STATES[s] for s in snap.blocks["state"]] == [
        "active_allocated", "inactive", "active_allocated", "inactive", "active_allocated",
        "inactive"]
    assert snap.blocks["segment"].tolist() == [0, 0, 1, 1, 1, 1]
    assert snap.skipped == 0 and snap.messages == []


def test_malformed_records_are_skipped_and_counted(tmp_path: Path) -> None:
    data = hand_snapshot()
    data["device_traces"][0] += [{"action": "teleport", "addr": 1, "size": 1}, "junk", 7]
    data["segments"].append("not a segment")
    snap = read_snapshot(write(tmp_path / "s.pickle", data))
    assert len(snap.entries["action"]) == 7 and snap.skipped == 4
    assert "Skipped 4 malformed" in snap.messages[0]


def test_the_cache_keeps_the_columns_not_the_pickle(tmp_path: Path) -> None:
    path = write(tmp_path / "s.pickle", hand_snapshot())
    cache = TraceCache(tmp_path / "cache")
    first = load_snapshot(path, cache=cache)
    stored = list((tmp_path / "cache").rglob("*"))
    assert any(p.name == "snapshot.npz" for p in stored)
    assert not any(p.suffix in (".pickle", ".pkl") for p in stored)
    path.write_bytes(b"garbage")  # same identity would be a lie: change size and mtime
    os.utime(path, (1, 1))
    with pytest.raises(SnapshotError):
        load_snapshot(path, cache=cache)
    write(path, hand_snapshot())
    os.utime(path, (2, 2))
    again = load_snapshot(path, cache=cache)
    assert again.stacks == first.stacks
    for part in ("entries", "segments", "blocks"):
        for name, column in getattr(first, part).items():
            np.testing.assert_array_equal(getattr(again, part)[name], column)
    cached = load_snapshot(path, cache=cache)  # from the cache now
    np.testing.assert_array_equal(cached.entries["time_us"], first.entries["time_us"])


def test_snapshots_are_discovered_beside_traces(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    traces = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
    for trace in traces:
        (run / trace.name).write_bytes(trace.read_bytes())
    paired = traces[1].name.replace(".pt.trace.json.gz", ".snapshot.pickle")
    for name in (paired, "dump_snapshot.pickle", "rank0_snapshot.pkl", "weights.pkl"):
        write(run / name, hand_snapshot())
    only = tmp_path / "only"
    only.mkdir()
    write(only / "oom.pickle", hand_snapshot())
    runs = {r.name: r for r in discover_runs(str(tmp_path))}
    assert [r.name for r in runs["run"].memory_snapshots] == sorted(
        [paired, "dump_snapshot.pickle", "rank0_snapshot.pkl"])
    spans = next(iter(runs["run"].workers.values()))
    assert spans[0].memory_snapshot is None  # several snapshots, none named after it
    assert spans[1].memory_snapshot is not None and spans[1].memory_snapshot.name == paired
    assert not runs["only"].workers and [r.name for r in runs["only"].memory_snapshots] == [
        "oom.pickle"]


@pytest.mark.e2e  # runs torch
def test_a_snapshot_written_by_pytorch_itself(tmp_path: Path) -> None:
    """`_profile_to_snapshot` is PyTorch's own writer of the snapshot format (from a CPU
    profile): blocks without addresses, entries without times, shared frames lists."""
    torch = import_torch()
    from torch.cuda._memory_viz import _profile_to_snapshot
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Linear(64, 64)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for _ in range(3):
            model(torch.randn(32, 64)).sum().backward()
    data = _profile_to_snapshot(prof)
    snap = read_snapshot(write(tmp_path / "torch.pickle", data))
    trace = data["device_traces"][0]
    assert len(snap.entries["action"]) == len(trace) and snap.skipped == 0
    assert [ACTIONS[a] for a in snap.entries["action"]] == [e["action"] for e in trace]
    assert snap.entries["size"].tolist() == [e["size"] for e in trace]
    assert not snap.has_time
    # block addresses follow from the segment's address and the sizes before them
    segment = data["segments"][0]
    starts = segment["address"] + np.concatenate(([0], np.cumsum(
        [b["size"] for b in segment["blocks"]])[:-1]))
    assert snap.blocks["address"].tolist() == starts.tolist()
