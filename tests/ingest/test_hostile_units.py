"""Issue 19, in process: what is read back from the cache is validated (deleted and recomputed
on mismatch), the payload files of a trace are bounded, files are opened without blocking and
served only from inside the logdir, the scanner's limits, and the die-with-parent mechanism on a
real forked process SIGKILLed."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.distributed.summary import summary_builtins
from tb_plugin.analysis.features import summarize
from tb_plugin.cache import TraceCache
from tb_plugin.children import die_with_parent
from tb_plugin.discovery import discover_runs, looks_like_chrome_trace
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.decode import try_decode_batch
from tb_plugin.ingest.plain import to_plain
from tb_plugin.ingest.scanner import EventStreamScanner, TokenTooLarge
from tb_plugin.load import load_snapshot, load_trace
from tb_plugin.server.filestate import FileState
from tb_plugin.server.tables import Tables
from tb_plugin.storage import (
    NotRegularFile,
    OutsideLogdir,
    file_ref,
    filesystem,
    open_file,
    open_ref,
    open_to_serve,
)
from tb_plugin.views.overview.payload import OverviewPayload
from tb_plugin.views.registry import SPECS
from tests.ingest import snapshots
from tests.support import SAMPLES
from tests.support.hostile import events, write
from tests.support.processes import wait_for, wait_gone


def _sample_ref() -> Any:
    return open_ref(str(sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]))


# -- 3: the cache is validated on read ---------------------------------------------------------


def test_tampered_payload_is_deleted_and_recomputed(tmp_path: Path) -> None:
    cache, ref = TraceCache(tmp_path), _sample_ref()
    good = {"view": "overview", "steps": []}
    calls: list[int] = []

    def compute() -> Any:
        calls.append(1)
        return good

    assert cache.payload(ref, "k", compute) == good and calls == [1]
    path = next(tmp_path.rglob("payloads/*.json"))
    path.write_text(json.dumps({"key": "k", "value": {"view": 5}}))  # valid JSON, wrong type
    schema = dict[str, Any]  # anything goes: the tampered value is served ...
    assert cache.payload(ref, "k", compute, schema) == {"view": 5} and calls == [1]
    # ... but against the payload's type it is not: deleted, recomputed, stored again
    assert cache.payload(ref, "k", compute, OverviewPayload) == good and calls == [1, 1]
    assert json.loads(path.read_text())["value"] == good


def test_corrupt_table_manifest_is_discarded(tmp_path: Path) -> None:
    cache, ref = TraceCache(tmp_path), _sample_ref()
    table = load_trace(ref, cache=cache)
    manifest = next(tmp_path.rglob("manifest.json"))
    document = json.loads(manifest.read_text())
    document["status"]["messages"] = 5  # valid JSON, wrong type
    manifest.write_text(json.dumps(document))
    assert cache.load_table(ref) is None and not manifest.exists()
    assert load_trace(ref, cache=cache).event_count == table.event_count  # parsed again
    document["status"]["messages"], document["status"]["state"] = [], "exploded"
    next(tmp_path.rglob("manifest.json")).write_text(json.dumps(document))
    assert cache.load_table(ref) is None  # an unknown state is corrupt too


def test_tampered_rank_summary_from_the_cache_writer_is_recomputed(tmp_path: Path) -> None:
    """The server's background writer stores the Distributed view's per-rank summary of a
    handed-over table; read back, a tampered one is deleted and recomputed, never served."""
    ref = open_ref(str(sorted((SAMPLES / "ddp_gloo").glob("*rank0*.pt.trace.json.gz"))[0]))
    table = parse_trace(ref, processes=1)
    tables = Tables(TraceCache(tmp_path), 1 << 30)
    state = FileState(ref, ref.identity())
    tables.adopt(state, to_plain(table), summarize(table))
    assert tables.wait_written(60)
    spec = SPECS["distributed"]
    name = hashlib.sha1(spec.summary_key().encode()).hexdigest() + ".json"
    path = next(tmp_path.rglob(name))  # written by the writer, not by this test
    stored = json.loads(path.read_text())
    expected = json.loads(json.dumps(summary_builtins(table)))
    assert stored["value"] == expected
    stored["value"]["groups"] = "five"  # valid JSON, wrong type
    path.write_text(json.dumps(stored))
    served = tables.payload(state, spec.summary_key(), spec.summarize, spec.summary_type)
    assert json.loads(json.dumps(served)) == expected
    assert json.loads(path.read_text())["value"] == expected  # stored again, repaired


@pytest.mark.parametrize("tamper", ["manifest", "index"])
def test_tampered_snapshot_columns_are_discarded(tmp_path: Path, tamper: str) -> None:
    ref = open_ref(str(snapshots.write(tmp_path / "snap.pickle", snapshots.hand_snapshot())))
    cache = TraceCache(tmp_path / "cache")
    good = load_snapshot(ref, cache=cache)
    assert cache.load_snapshot(ref) is not None
    entry = next((tmp_path / "cache").rglob("snapshot.npz")).parent
    if tamper == "manifest":
        manifest = json.loads((entry / "manifest.json").read_text())
        manifest["messages"] = "abc"  # would be read as the messages a, b, c
        (entry / "manifest.json").write_text(json.dumps(manifest))
    else:  # a block pointing past the segments: an IndexError (500) in the analysis
        with np.load(entry / "snapshot.npz") as arrays:
            columns = dict(arrays)
        columns["blocks.segment"] = columns["blocks.segment"] + 100
        np.savez(entry / "snapshot.npz", **columns)
    assert cache.load_snapshot(ref) is None and not entry.exists()
    again = load_snapshot(ref, cache=cache)  # read from the pickle again
    assert (again.stacks, again.messages) == (good.stacks, good.messages)
    assert (again.blocks["segment"] == good.blocks["segment"]).all()


# -- 8: payload files per trace are bounded -----------------------------------------------------


def test_payload_files_are_evicted_least_recently_used(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_PROF_PAYLOAD_CACHE_MB", "1")
    cache, ref = TraceCache(tmp_path), _sample_ref()
    blob = "x" * (100 << 10)  # ~100 KB per payload: about 10 fit in 1 MB
    cache.payload(ref, "first", lambda: blob)
    for i in range(30):
        cache.payload(ref, f"p{i}", lambda: blob)
        assert cache.get_payload(ref, "first") == blob  # read: recently used, kept
    folder = next(tmp_path.rglob("payloads"))
    sizes = [p.stat().st_size for p in folder.glob("*.json")]
    assert sum(sizes) <= (1 << 20) and len(sizes) == 10
    assert cache.get_payload(ref, "p0") is None and cache.get_payload(ref, "p29") == blob


# -- 2 and 4: opening files ------------------------------------------------------------------


def test_a_fifo_is_never_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "w.pt.trace.json"
    os.mkfifo(fifo)
    fs, path = filesystem(str(fifo))
    with pytest.raises(NotRegularFile):
        open_file(fs, path)  # without O_NONBLOCK this open waits for a writer forever
    assert not looks_like_chrome_trace(fs, path)
    assert discover_runs(str(tmp_path)) == []


def test_serving_stops_at_the_logdir_real_path(tmp_path: Path) -> None:
    outside = write(tmp_path / "secret" / "data.json", b'{"traceEvents": []}')
    logs = tmp_path / "logs"
    write(logs / "run" / "real.pt.trace.json", b'{"traceEvents": []}')
    os.symlink(outside, logs / "run" / "link.pt.trace.json")
    os.symlink(outside, logs / "run" / "w.raw.json.gz")  # a memory export out of the logdir
    run = discover_runs(str(logs))[0]
    refs = {name: spans[0].ref for name, spans in run.workers.items()}
    with open_to_serve(refs["real"]) as handle:
        assert handle.read() == b'{"traceEvents": []}'
    with pytest.raises(OutsideLogdir, match="TORCH_PROF_SERVE_OUTSIDE_LOGDIR"):
        open_to_serve(refs["link"])
    assert run.memory_timelines == []  # not attached, so never served
    allowed = discover_runs(str(logs), serve_outside_logdir=True)[0]  # the user opts in
    with open_to_serve(allowed.workers["link"][0].ref) as handle:
        assert handle.read() == b'{"traceEvents": []}'
    assert len(allowed.memory_timelines) == 1


def test_a_file_swapped_for_a_link_after_the_scan_is_not_served(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    inside = write(logs / "run" / "w.pt.trace.json", b'{"traceEvents": []}')
    ref = file_ref(*filesystem(str(inside)), root=os.path.realpath(logs))
    inside.unlink()
    os.symlink("/etc/passwd", inside)  # checked at open time, on the opened descriptor
    with pytest.raises(OutsideLogdir):
        open_to_serve(ref)


# -- 1 and 9: the scanner's limits ---------------------------------------------------------------


def test_scanner_token_limit_is_exact_and_keeps_the_events_before() -> None:
    scanner = EventStreamScanner(try_decode_batch, max_token=1 << 20)
    got = list(scanner.feed(b'{"traceEvents":[' + events(0, 3) + b',{"name":"'))
    got += list(scanner.feed(b"a" * (1 << 19)))  # within the limit: buffered
    with pytest.raises(TokenTooLarge, match="longer than 1 MB"):
        list(scanner.feed(b"a" * (1 << 19)))
    assert sum(len(decoded) for _, decoded in got) == 3


@pytest.mark.parametrize("chunk", [1 << 16, 1 << 20])
def test_scanner_limit_counts_only_the_event_in_progress(chunk: int) -> None:
    """Issue 32: complete events are cut before the limit is applied, so adjacent events each
    over half the limit (and up to it) are read, whatever the doubling retry schedule last
    tried; an event still unfinished when the buffer passes the limit (here one read chunk
    longer than it) stops. Without the cut first, the 0.6x events stopped as "too long"."""
    limit = 1 << 20

    def event(size: int, ts: int) -> bytes:
        head = b'{"ph":"X","ts":%d,"dur":1,"name":"' % ts
        return head + b"a" * (size - len(head) - 2) + b'"}'

    for size, stops in ((limit * 3 // 5, False), (limit - 1, False), (limit + chunk + 1, True)):
        data = b'{"traceEvents":[' + b",".join(event(size, ts) for ts in range(4)) + b"]}"
        scanner = EventStreamScanner(try_decode_batch, max_token=limit)
        got: list[Any] = []
        if stops:
            with pytest.raises(TokenTooLarge):
                _scan_in_chunks(scanner, data, chunk, got)
            assert got == []
        else:
            _scan_in_chunks(scanner, data, chunk, got)
            assert [e.ts for _, decoded in got for e in decoded] == [0, 1, 2, 3], size


def _scan_in_chunks(scanner: EventStreamScanner, data: bytes, chunk: int, got: list[Any]
                    ) -> None:
    for start in range(0, len(data), chunk):
        got.extend(scanner.feed(data[start: start + chunk]))
    got.extend(scanner.close())


def test_scanner_drops_whitespace_between_events() -> None:
    scanner = EventStreamScanner(try_decode_batch, max_token=1 << 20)
    list(scanner.feed(b'{"traceEvents":[' + events(0, 3) + b","))
    for _ in range(64):  # 64 MB of spaces: far over the token limit, but not a token
        list(scanner.feed(b" " * (1 << 20)))
    batches = [*scanner.feed(events(3, 5) + b"]}"), *scanner.close()]
    assert scanner.result.events_closed
    assert sum(len(decoded) for _, decoded in batches if decoded) == 2


# -- 7: children die with their parent ------------------------------------------------------


def _grandchild(ready: Any) -> None:
    die_with_parent()
    ready.send(os.getpid())
    ready.recv()  # blocks: only its parent's death can end it


def _parent(ready: Any) -> None:
    context = multiprocessing.get_context("fork")
    child = context.Process(target=_grandchild, args=(ready,), daemon=False)
    child.start()
    child.join()


def test_a_child_dies_when_its_parent_is_killed() -> None:
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    parent = context.Process(target=_parent, args=(theirs,))
    parent.start()
    grandchild = ours.recv()  # the grandchild is armed and waiting
    assert wait_for(lambda: os.path.exists(f"/proc/{grandchild}"), timeout=10)
    os.kill(parent.pid, signal.SIGKILL)
    parent.join()
    assert wait_gone([grandchild], timeout=30) == []
    ours.close()
