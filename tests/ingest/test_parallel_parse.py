"""A file parsed by N processes must give exactly the sequential parse (the metamorphic
test: N-way equals sequential), whatever its boundaries and whatever the children do."""

from __future__ import annotations

import functools
import gzip
import json
import logging
import multiprocessing
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

import pytest

from tb_plugin import storage
from tb_plugin.ingest import TraceTable, parallel, parse_trace, split_child, split_plan
from tb_plugin.ingest.parse import MAX_PROBLEM_MESSAGES
from tb_plugin.settings import PARSE_PROCESSES_ENV
from tb_plugin.storage import open_ref
from tests.ingest.tables import assert_same_table, document, make_events
from tests.support import needs_shared, shared_trace_files

MERGED = "merged the child's"
LOGGER = "tb_plugin.ingest.parallel"


def _parse(path: Path, **options: Any) -> TraceTable:
    return parse_trace(open_ref(str(path)), **options)


def _split_vs_sequential(path: Path, caplog: pytest.LogCaptureFixture, processes: int = 2
                         ) -> tuple[TraceTable, str]:
    """Parse both ways, assert they are identical; the split's log tells what it did."""
    sequential = _parse(path, processes=1)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        split = _parse(path, processes=processes, min_split_bytes=1)
    assert_same_table(sequential, split)
    return split, caplog.text


@pytest.fixture(autouse=True)
def _patient_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent stops waiting for a child's boundary after `_BOUNDARY_WAIT_S` (5 s) and then
    parses alone: correct, but not the merge these tests assert. A loaded machine can take
    longer than that to start a child, so the tests wait as long as a child may take (the
    silence limit still ends a stuck one); the test that needs the give-up sets its own."""
    monkeypatch.setattr(parallel, "_BOUNDARY_WAIT_S", parallel._SILENCE_LIMIT_S)


def _merged(log: str) -> int:
    return log.count(MERGED)


NWAY = [2, 3, 4]


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return make_events(50_000)


@pytest.mark.parametrize("processes", NWAY)
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_split_equals_sequential(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                 events: list[dict[str, Any]], gz: bool, processes: int) -> None:
    data = document(events)
    path = tmp_path / ("w.pt.trace.json.gz" if gz else "w.pt.trace.json")
    path.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
    table, log = _split_vs_sequential(path, caplog, processes)
    assert _merged(log) == processes - 1  # every child's part was used
    assert table.status.state == "ok" and len(table.events) > 40_000
    assert len(table.device_args) and len(table.op_args) and len(table.python_args)
    assert len(table.memory) and len(table.flows)
    assert table.status.bytes_read == len(data)


def test_legacy_bare_array_and_metadata_after_events(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture,
                                                    events: list[dict[str, Any]]) -> None:
    bare = tmp_path / "legacy.json"
    bare.write_bytes(json.dumps(events[:20_000], indent=1).encode())  # newlines between events
    assert MERGED in _split_vs_sequential(bare, caplog)[1]
    after = tmp_path / "after.json"
    after.write_bytes(document(events[:20_000], metadata_after=True))
    table, log = _split_vs_sequential(after, caplog)
    assert MERGED in log
    assert table.metadata.distributed_info == {"rank": 0}  # from the child's trailer
    assert table.metadata.base_time_ns == 1700000000000000000


def _with_middle_in(events: list[dict[str, Any]], filler: dict[str, Any]) -> list[dict[str, Any]]:
    """`filler` between two halves of `events`, big enough to hold the file's middle byte."""
    half = len(events) // 2
    return [*events[:half], filler, *events[half:]]


@pytest.mark.parametrize("where", ["string", "nested"])
def test_false_boundary_falls_back_to_sequential(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture,
                                                 events: list[dict[str, Any]],
                                                 where: str) -> None:
    body = events[:4000]
    if where == "string":  # `}, {` inside a string, over the middle of the file
        filler = {"ph": "X", "name": '}, {"fake": 1' * 40_000, "ts": 5, "dur": 1}
    else:  # `}, {` between objects nested in the arguments
        filler = {"ph": "X", "name": "nested", "ts": 5, "dur": 1,
                  "args": {"list": [{"a": i} for i in range(60_000)]}}
    path = tmp_path / "w.json"
    path.write_bytes(document(_with_middle_in(body, filler)))
    table, log = _split_vs_sequential(path, caplog)
    assert "is not between two events" in log and MERGED not in log
    assert len(table.events) == len(_parse(path, processes=1).events)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("cut", [0.3, 0.75])
def test_truncated_files(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                         monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]],
                         gz: bool, cut: float) -> None:
    data = document(events[:20_000])
    stored = gzip.compress(data, compresslevel=1) if gz else data
    path = tmp_path / "w.json"
    path.write_bytes(stored[: int(len(stored) * cut)])
    # The size of the complete file, as a gzip trailer would claim or a file still growing
    # had: cut at 30% the stream ends before the middle, and the child finds nothing.
    monkeypatch.setattr(split_plan, "uncompressed_size", lambda _: (len(data), gz))
    table, log = _split_vs_sequential(path, caplog)
    assert table.status.state == "truncated"
    assert (MERGED in log) == (cut > 0.5)


def test_malformed_events_in_both_halves(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                         events: list[dict[str, Any]]) -> None:
    pieces = [json.dumps(e).encode() for e in events[:20_000]]
    broken = [b'{"ph": "X", "name": "bad json", "ts": 2, "dur": }',
              b'{"ph": "X", "name": "na", "ts": 3, "dur": N/A, "tid": 1}',
              b'{"ph": "X", "name": "bad args", "ts": 4, "dur": 1, "args": "oops"}', b"17",
              b'{"ph": "X", "name": "neg", "ts": 4, "dur": -5}', b'{"ph": "X", "name": "no ts"}']
    slots = 4 * len(broken)  # each kind, twice in each half
    for i in range(slots):
        pieces.insert((i + 1) * len(pieces) // (slots + 1), broken[i % len(broken)])
    path = tmp_path / "w.json"
    path.write_bytes(b'{"traceEvents": [' + b", ".join(pieces) + b"]}")
    table, log = _split_vs_sequential(path, caplog)
    assert MERGED in log
    assert table.status.state == "partial"
    assert table.status.skipped_events == 8  # bad json and 17, 4 times each
    problems = [m for m in table.status.messages if "malformed event" in m or "argument" in m]
    assert len(problems) <= MAX_PROBLEM_MESSAGES


@needs_shared
@pytest.mark.parametrize("processes", NWAY)
@pytest.mark.parametrize("path", shared_trace_files(), ids=lambda p: p.parent.name)
def test_shared_traces(path: Path, caplog: pytest.LogCaptureFixture, processes: int) -> None:
    log = _split_vs_sequential(path, caplog, processes)[1]
    # Each child's part is used, except where a header longer than a part made several
    # children start at the same event (small traces).
    assert _merged(log) + log.count("starts at the same byte") == processes - 1


def test_environment_and_keyword_force_sequential(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  events: list[dict[str, Any]]) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:5000]))
    ref = open_ref(str(path))
    assert split_plan.plan_split(ref, min_bytes=1) is not None
    assert split_plan.plan_split(ref) is None  # below the default 64 MB
    assert split_plan.plan_split(ref, processes=1, min_bytes=1) is None
    assert split_plan.plan_split(ref, min_bytes=1, configured=1) is None  # the setting, passed
    assert split_plan.plan_split(ref, processes=2, min_bytes=1, configured=1) is not None
    monkeypatch.setenv(PARSE_PROCESSES_ENV, "1")  # read where the parse starts (parse_trace)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        _parse(path, min_split_bytes=1)
    assert "processes" not in caplog.text


def test_uncompressed_size(tmp_path: Path) -> None:
    plain, packed, wrapped = tmp_path / "a.json", tmp_path / "b.json.gz", tmp_path / "c.gz"
    plain.write_bytes(b"[]" * 100)
    packed.write_bytes(gzip.compress(b"[]" * 100_000))
    # A trailer smaller than the compressed file: wrapped past 4 GiB, or truncated.
    wrapped.write_bytes(gzip.compress(os.urandom(5000))[:-4] + (10).to_bytes(4, "little"))
    assert split_plan.uncompressed_size(str(plain)) == (200, False)
    assert split_plan.uncompressed_size(str(packed)) == (200_000, True)
    assert split_plan.uncompressed_size(str(wrapped)) is None
    assert split_plan.uncompressed_size(str(tmp_path / "missing")) is None


def test_category_order_does_not_depend_on_batching(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    events: list[dict[str, Any]]) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:20_000]))
    reference = _parse(path, processes=1)
    for chunk_size in (4096, 100_003):
        monkeypatch.setattr(storage, "CHUNK_SIZE", chunk_size)
        assert_same_table(reference, _parse(path, processes=1))


# -- the child misbehaves: the parent must end up with the sequential parse all the same ------


def _raise(*_: Any) -> Any:
    raise RuntimeError("boom")


def _hang(finished: Path, *_: Any) -> Any:
    """A second half that takes a minute, then leaves a mark (only if nobody killed it)."""
    time.sleep(60)  # stands for a hung child; the parent must not wait for it
    finished.write_text("the parent waited for the hung child")


_real_send_part = split_child._send_part


def _die_while_sending(conn: Any, parse: Any, end: Any) -> None:
    send_bytes, sent = conn.send_bytes, []

    def dying_send_bytes(data: Any) -> None:
        if len(sent) == 3:
            os._exit(1)
        sent.append(1)
        send_bytes(data)

    conn.send_bytes = dying_send_bytes
    _real_send_part(conn, parse, end)


@pytest.mark.parametrize("failure", ["raises", "hangs", "dies", "bogus_boundary"])
def test_failing_child_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                  monkeypatch: pytest.MonkeyPatch,
                                  events: list[dict[str, Any]], failure: str) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:20_000]))
    if failure == "raises":
        monkeypatch.setattr(split_child, "_parse_part", _raise)
    elif failure == "hangs":
        monkeypatch.setattr(split_child, "_parse_part",
                            functools.partial(_hang, tmp_path / "finished"))
        monkeypatch.setattr(parallel, "_BOUNDARY_WAIT_S", 0.5)
    elif failure == "dies":
        monkeypatch.setattr(split_child, "_send_part", _die_while_sending)
    else:  # the `"` before a name: inside an event
        monkeypatch.setattr(split_child, "_BOUNDARY", re.compile(rb'"name": "'))
    children_before = set(multiprocessing.active_children())
    _, log = _split_vs_sequential(path, caplog)
    assert MERGED not in log and re.search(rf"another process\): .*{re.escape(_WHY[failure])}",
                                           log)
    # The child was ended and reaped, not waited for (behaviour, not a time limit).
    assert set(multiprocessing.active_children()) == children_before
    assert not (tmp_path / "finished").exists()


#: What the parent logs when it gives up on the child (for a hang: not the child's 60 s sleep,
#: the parent's own patience).
_WHY = {
    "raises": "RuntimeError: boom",
    "hangs": "no boundary from the child after",
    "dies": "receiving the child's columns failed",
    "bogus_boundary": "is not between two events",
}


def test_spawned_child(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                       monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]]) -> None:
    """The start method where fork is not used (macOS, Windows)."""
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:10_000]))
    monkeypatch.setattr(parallel, "_start_method", lambda: "spawn")
    assert MERGED in _split_vs_sequential(path, caplog)[1]


# -- called from a worker of a process pool ------------------------------------------------------


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _parse_in_worker(path: str) -> tuple[TraceTable, list[str]]:
    handler, logger = _ListHandler(), logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        return parse_trace(open_ref(path), processes=2, min_split_bytes=1), handler.lines
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("pool", ["futures", "multiprocessing"])
def test_inside_a_pool_worker(tmp_path: Path, events: list[dict[str, Any]], pool: str) -> None:
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:10_000]))
    context = multiprocessing.get_context("fork")
    lines: Optional[list[str]]
    if pool == "futures":  # non-daemonic workers (3.9+): they may split
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
            table, lines = executor.submit(_parse_in_worker, str(path)).result(timeout=120)
        assert any(MERGED in line for line in lines)
    else:  # daemonic workers cannot have children: parsed alone, without an error
        with context.Pool(1) as workers:
            table, lines = workers.apply(_parse_in_worker, (str(path),))
        assert not any(MERGED in line for line in lines)
    assert_same_table(_parse(path, processes=1), table)


def test_gzip_is_read_in_small_chunks(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    """Inflated chunks of at most CHUNK_SIZE: 2 MB of gzip is ~20 MB of JSON, and a chunk
    that size makes batches that size, in each of the two processes."""
    data = document(events)
    path = tmp_path / "w.json.gz"
    path.write_bytes(gzip.compress(data, compresslevel=1))
    with path.open("rb") as handle:
        chunks = list(storage.iter_decompressed(handle))
    assert b"".join(chunks) == data
    assert max(len(c) for c in chunks) <= storage.CHUNK_SIZE < len(data)


# -- N parts with awkward boundaries: false candidates, failed children between good ones -----


_STRING_FILLER = {"ph": "X", "name": '}, {"fake": 1' * 40_000, "ts": 5, "dur": 1}
_NESTED_FILLER = {"ph": "X", "name": "nested", "ts": 5, "dur": 1,
                  "args": {"list": [{"a": i} for i in range(40_000)]}}


def _document_with_fillers(events: list[dict[str, Any]], fillers: dict[int, dict[str, Any]],
                           processes: int) -> tuple[bytes, list[int], dict[int, range]]:
    """The events as a trace, fillers[k] placed around byte k * size / processes (the k-th
    child's mid); also the mids and where each filler is."""
    pieces = [json.dumps(e).encode() for e in events]
    extra = {k: json.dumps(f).encode() for k, f in fillers.items()}
    head, tail, sep = b'{"traceEvents": [', b"]}", b", "
    size = (len(head) + len(tail) + sum(map(len, pieces)) + sum(map(len, extra.values()))
            + len(sep) * (len(pieces) + len(extra) - 1))
    mids = [size * k // processes for k in range(1, processes)]
    out, offset, spans = [], len(head), {}
    for piece in pieces:
        for k in sorted(extra):
            if offset + len(extra[k]) // 2 >= mids[k - 1]:
                filler = extra.pop(k)
                out.append(filler)
                spans[k] = range(offset, offset + len(filler))
                offset += len(filler) + len(sep)
        out.append(piece)
        offset += len(piece) + len(sep)
    data = head + sep.join(out) + tail
    assert len(data) == size
    return data, mids, spans


@pytest.mark.parametrize("processes, fillers, merges", [
    (3, {1: _STRING_FILLER, 2: _STRING_FILLER}, 0),  # every candidate is false
    (3, {1: _NESTED_FILLER}, 1),  # the parent proves B1 false and parses on to B2
    (4, {1: _STRING_FILLER, 3: _NESTED_FILLER}, 1),  # child 2 proves B3 false itself
    (4, {2: _NESTED_FILLER}, 2),  # child 1 parses on over child 2's part
])
def test_n_parts_with_false_boundaries(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                       events: list[dict[str, Any]], processes: int,
                                       fillers: dict[int, dict[str, Any]], merges: int) -> None:
    data, mids, spans = _document_with_fillers(events[:16_000], fillers, processes)
    for k in fillers:
        assert mids[k - 1] in spans[k]  # the k-th mid falls inside its filler
    path = tmp_path / "w.json"
    path.write_bytes(data)
    table, log = _split_vs_sequential(path, caplog, processes)
    assert _merged(log) == merges
    assert table.status.state == "ok" and table.status.bytes_read == len(data)


def _fail_one(which: str, real: Any, conn: Any, plan: Any) -> Any:
    if (plan.next_mid is None) == (which == "last"):
        raise RuntimeError("boom")
    return real(conn, plan)


@pytest.mark.parametrize("which", ["first", "last"])
def test_failed_child_between_good_parts(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch,
                                         events: list[dict[str, Any]], which: str) -> None:
    """3 processes, one child fails: the parent parses that part itself between the others."""
    path = tmp_path / "w.json"
    path.write_bytes(document(events[:20_000]))
    monkeypatch.setattr(split_child, "_parse_part",
                        functools.partial(_fail_one, which, split_child._parse_part))
    table, log = _split_vs_sequential(path, caplog, processes=3)
    assert _merged(log) == 1 and "RuntimeError: boom" in log
    assert table.status.bytes_read == path.stat().st_size


def test_split_count_is_bounded_by_size_and_memory() -> None:
    mb = 1 << 20
    assert split_plan.split_count(63 * mb, processes=8, memory=1 << 40) == 1  # too small
    assert split_plan.split_count(100 * mb, processes=8, memory=1 << 40) == 3  # parts >= 32 MB
    assert split_plan.split_count(1000 * mb, processes=8, memory=1 << 40) == 8
    # 1000 MB of columns plus 64 MB per extra process in 1200 MB: 3 more processes
    assert split_plan.split_count(1000 * mb, processes=8, memory=1200 * mb) == 4
    assert split_plan.split_count(1000 * mb, processes=8, memory=500 * mb) == 1
    assert split_plan.split_count(1000 * mb, processes=1, memory=1 << 40) == 1
