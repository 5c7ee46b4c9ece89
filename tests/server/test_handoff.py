"""The critical path of a cold open: the selected run is parsed first, and a parsed table reaches
the server without a disk round-trip (the cache is written in the background)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

from tb_plugin.analysis.features import summarize
from tb_plugin.cache import TraceCache
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.plain import from_plain, to_plain
from tb_plugin.load import load_trace
from tb_plugin.server import parse_child
from tb_plugin.server.errors import StillLoading
from tb_plugin.server.filestate import FileState
from tb_plugin.server.parse_child import HANDOVER_MAX_BYTES, peek_summary
from tb_plugin.server.pool import LoadJob, LoadOutcome
from tb_plugin.server.store import RunStore
from tb_plugin.server.tables import Tables
from tb_plugin.settings import Settings
from tb_plugin.storage import open_ref
from tests.ingest.tables import assert_same_table
from tests.support import SAMPLES

SAMPLE = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]


class _Pool:
    """A parser pool that parses nothing and records what the catalogue asks of it."""

    def __init__(self, root: Path, on_start: Callable[[str], None],
                 on_progress: Callable[[str, float], None],
                 on_done: Callable[[LoadOutcome], None]) -> None:
        self.on_done = on_done
        self.bumped: list[str] = []

    def submit(self, job: LoadJob) -> None:
        pass

    def bump(self, key: str, priority: int = 10) -> None:
        self.bumped.append(key)

    def cancel(self, key: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def queued(tmp_path: Path) -> Iterator[tuple[RunStore, _Pool]]:
    pools: list[_Pool] = []

    def make_pool(*args: Any) -> _Pool:
        pools.append(_Pool(*args))
        return pools[-1]

    store = RunStore(str(SAMPLES), cache=TraceCache(tmp_path / "cache"), config=Settings(),
                     pool_factory=make_pool)
    store.start()
    assert store.wait_first_scan(60)
    try:
        yield store, pools[0]
    finally:
        store.close()


def test_the_selected_run_is_parsed_first(queued: tuple[RunStore, _Pool]) -> None:
    store, pool = queued
    with pytest.raises(StillLoading):
        store.views("cnn_bs64")  # the UI selected this run: all of it is loading
    assert set(pool.bumped) == {store.file("cnn_bs64", "vm_9710", span).identity
                                for span in ("1", "2")}  # its two files, no other
    pool.bumped.clear()
    assert store.spans("ddp_gloo", "vm_9853_rank1") == ["1", "2"]  # the selected worker
    assert set(pool.bumped) == {store.file("ddp_gloo", "vm_9853_rank1", span).identity
                                for span in ("1", "2")}


def test_plain_table_round_trip() -> None:
    table = parse_trace(open_ref(str(SAMPLE)), processes=1)
    assert_same_table(load_trace(str(SAMPLE), use_cache=False), from_plain(to_plain(table)))


def test_adopted_table_is_served_without_the_cache(tmp_path: Path) -> None:
    """The cache cannot be written (its root is a file): the view still gets the table."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    ref = open_ref(str(SAMPLE))
    table = parse_trace(ref, processes=1)
    tables = Tables(TraceCache(blocked), 1 << 30)
    state = FileState(ref, ref.identity())
    tables.adopt(state, to_plain(table), summarize(table))
    assert tables.wait_written(60)  # the write was tried (and failed)
    assert tables.cache.load_table(ref) is None
    assert_same_table(load_trace(str(SAMPLE), use_cache=False), tables.table(state))


def test_adopted_table_and_summary_are_written_to_the_cache(tmp_path: Path) -> None:
    ref = open_ref(str(SAMPLE))
    table = parse_trace(ref, processes=1)
    summary = summarize(table)
    cache = TraceCache(tmp_path / "cache")
    tables = Tables(cache, 1 << 30)
    tables.adopt(FileState(ref, ref.identity()), to_plain(table), summary)
    assert tables.wait_written(60)
    expected = load_trace(str(SAMPLE), use_cache=False)
    cached = cache.load_table(ref)
    assert cached is not None
    assert_same_table(expected, cached)
    assert peek_summary(cache, ref) == summary and summary["state"] == "ok"


def test_real_parser_pool_hands_the_table_over(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir" / "cnn_bs32"
    logdir.mkdir(parents=True)
    shutil.copy(SAMPLE, logdir / SAMPLE.name)
    store = RunStore(str(logdir.parent), cache=TraceCache(tmp_path / "cache"),
                     config=Settings(load_workers=1))
    store.start()
    try:
        assert store.wait_first_scan(60)
        state = store.file("cnn_bs32", "vm_9710", "1")
        _wait_parsed(store)
        assert_same_table(load_trace(str(SAMPLE), use_cache=False), store.table(state))
        assert store.wait_written(60)
        assert peek_summary(TraceCache(tmp_path / "cache"), state.ref) is not None
    finally:
        store.close()


def _wait_parsed(store: RunStore, timeout: float = 120) -> None:
    """Poll the file's observable state until it is parsed (the timeout only guards a hang)."""
    deadline = time.monotonic() + timeout
    while store.status("cnn_bs32", "vm_9710", "1")["state"] in ("queued", "loading"):
        assert time.monotonic() < deadline, "the file was not parsed in time"
        time.sleep(0.01)


@pytest.mark.parametrize("limit", [HANDOVER_MAX_BYTES, 0], ids=["handed-over", "via-cache"])
def test_parser_hands_small_tables_over_and_caches_big_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(parse_child, "HANDOVER_MAX_BYTES", limit)
    ref = open_ref(str(SAMPLE))
    parsed = parse_child.parse_file("key", ref, str(tmp_path / "cache"), processes=1)
    expected = load_trace(str(SAMPLE), use_cache=False)
    cache = TraceCache(tmp_path / "cache")
    assert parsed.summary == summarize(expected) and parsed.summary["state"] == "ok"
    if limit:  # in the result, and nothing written by the child
        assert parsed.table is not None and cache.load_table(ref) is None
        assert_same_table(expected, from_plain(parsed.table))
    else:  # too big to pickle twice: in the cache, with its summary
        cached = cache.load_table(ref)
        assert parsed.table is None and cached is not None
        assert_same_table(expected, cached)
        assert peek_summary(cache, ref) == parsed.summary
