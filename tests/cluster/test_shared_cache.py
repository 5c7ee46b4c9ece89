"""The cache on fsspec URLs (memory://, file://): round trips, entries committed by a marker
(a dead writer's leftovers and a corrupted file are never read), many concurrent writers and
readers, and a cache that cannot be written (reported once; the run still loads)."""

from __future__ import annotations

import gzip
import json
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import pytest

from tb_plugin import cache as cache_module
from tb_plugin.batch import local_workers
from tb_plugin.cache import TraceCache, default_cache
from tb_plugin.cli import main
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.memory_export import read_raw_timeline
from tb_plugin.storage import FileRef, open_ref
from tests.cluster.ranks import write_rank, write_run
from tests.ingest.tables import assert_same_table


@pytest.fixture(params=["memory", "file"])
def url(request, tmp_path: Path) -> str:
    if request.param == "memory":
        return f"memory://torch-prof-test/{uuid.uuid4().hex}"
    return f"file://{tmp_path / 'shared'}"


@pytest.fixture
def ref(tmp_path: Path):
    return open_ref(str(write_rank(tmp_path, 3, 8)))


def test_roundtrip_of_tables_exports_and_payloads(url: str, ref, tmp_path: Path) -> None:
    cache = TraceCache(url)
    assert cache.load_table(ref) is None and cache.get_payload(ref, "k") is None
    table = parse_trace(ref)
    cache.save_table(ref, table)
    assert_same_table(table, cache.load_table(ref))
    assert cache.payload(ref, "k", lambda: {"a": [1, 2]}) == {"a": [1, 2]}
    assert cache.payload(ref, "k", lambda: pytest.fail("computed twice")) == {"a": [1, 2]}
    assert cache.get_payload(ref, "k") == {"a": [1, 2]}
    export = tmp_path / "w.raw.json.gz"
    export.write_bytes(gzip.compress(b"[[1000, 2, 512, 0], [2000, 3, 512, 0]]"))
    raw = read_raw_timeline(open_ref(str(export)))
    cache.save_export(open_ref(str(export)), raw)
    again = cache.load_export(open_ref(str(export)))
    assert again is not None and again.ts_ns.tolist() == raw.ts_ns.tolist() == [1000, 2000]


def _files(url: str) -> dict[str, bytes]:
    fs, root = fsspec.core.url_to_fs(url)
    return {path[len(root):]: fs.cat_file(path) for path in fs.find(root)}


def test_entry_is_one_generation_and_a_marker(url: str, ref) -> None:
    cache = TraceCache(url)
    assert cache.writable()  # the probe object is removed again (no file below)
    cache.save_table(ref, parse_trace(ref))
    names = sorted(path.rsplit("/", 2)[-2:][-1] for path in _files(url))
    assert names == ["COMMIT.json", "columns.npz", "manifest.json"]
    (marker_path,) = [p for p in _files(url) if p.endswith("COMMIT.json")]
    marker = json.loads(_files(url)[marker_path])
    assert sorted(marker["files"]) == ["columns.npz", "manifest.json"]
    assert len(marker["generation"]) == 32


def test_dead_writers_leftovers_are_invisible(url: str, ref) -> None:
    cache = TraceCache(url)
    table = parse_trace(ref)
    cache.save_table(ref, table)
    fs, root = fsspec.core.url_to_fs(url)
    (marker,) = [p for p in fs.find(root) if p.endswith("COMMIT.json")]
    entry = marker.rsplit("/", 1)[0]
    fs.rm(marker)  # as if the writer died before committing: its files are there, unread
    assert cache.load_table(ref) is None
    fs.makedirs(f"{entry}/deadbeef", exist_ok=True)
    fs.pipe_file(f"{entry}/deadbeef/columns.npz", b"half a file")  # another dead writer
    cache.save_table(ref, table)  # a retry commits a complete generation
    assert_same_table(table, cache.load_table(ref))


def test_corrupted_committed_file_is_not_trusted(url: str, ref, caplog) -> None:
    cache = TraceCache(url)
    cache.save_table(ref, parse_trace(ref))
    fs, root = fsspec.core.url_to_fs(url)
    (columns,) = [p for p in fs.find(root) if p.endswith("columns.npz")]
    data = bytearray(fs.cat_file(columns))
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    fs.pipe_file(columns, bytes(data))
    with caplog.at_level(logging.WARNING, logger="tb_plugin.cache_fs"):
        assert cache.load_table(ref) is None
    assert "does not match its digest" in caplog.text


def test_many_concurrent_writers_and_readers(url: str, ref) -> None:
    table = parse_trace(ref)
    cache = TraceCache(url)

    def write(_: int) -> None:
        TraceCache(url).save_table(ref, table)

    def read(_: int):
        return TraceCache(url).load_table(ref)

    with ThreadPoolExecutor(16) as pool:
        jobs = [pool.submit(write if i % 2 else read, i) for i in range(64)]
        results = [job.result() for job in jobs]
    seen = [r for i, r in enumerate(results) if i % 2 == 0 and r is not None]
    for loaded in seen:  # a reader sees no entry or a whole one, never half of one
        assert_same_table(table, loaded)
    assert_same_table(table, cache.load_table(ref))
    assert len([p for p in _files(url) if p.endswith("COMMIT.json")]) == 1


def test_default_cache_reads_a_url_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCH_PROF_CACHE_DIR", f"file://{tmp_path}/c")
    monkeypatch.setattr(cache_module, "_default", None)
    assert default_cache().root == f"file://{tmp_path}/c"
    assert default_cache().shared is not None


def test_unwritable_cache_url_is_reported_once_and_the_run_loads(tmp_path: Path, capsys,
                                                                caplog) -> None:
    write_run(tmp_path / "logs", 6)
    blocker = tmp_path / "a-file"
    blocker.write_text("a regular file: nothing can be created below it")
    caplog.set_level(logging.WARNING)
    assert main(["--cache-dir", f"file://{blocker}/cache", "summary", str(tmp_path / "logs"),
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    assert [(w["spans"][0]["state"], w["spans"][0]["events"]) for w in rows] == [("ok", 48)] * 6
    reports = [r for r in caplog.records if "cannot write to the cache" in r.getMessage()]
    assert len(reports) == 1 and str(blocker) in reports[0].getMessage()


RATIO = 100  # the default max inflate ratio (settings.Settings.max_inflate_ratio)


def test_local_workers_are_bounded_by_files_cpus_and_memory(tmp_path: Path) -> None:
    def refs(count: int, size: int, name: str = "w.pt.trace.json") -> list:
        return [FileRef(None, f"/{i}/{name}", size, "0") for i in range(count)]

    assert local_workers(refs(3, 1 << 20), 8, 64 << 30, RATIO) == 0  # a few files: in-process
    assert local_workers(refs(5, 1 << 20), 8, 64 << 30, RATIO) == 5  # not more than files
    assert local_workers(refs(100, 1 << 20), 8, 64 << 30, RATIO) == 8  # nor than CPUs
    # 4 GB available: half of it over (192 MB + 808 MB) per process = 2 processes
    assert local_workers(refs(100, 808 << 20), 8, 4 << 30, RATIO) == 2
    # gzip: 50 MB inflates to about 1 GB; 1 GB available still runs one process
    assert local_workers(refs(100, 50 << 20, "w.pt.trace.json.gz"), 8, 1 << 30, RATIO) == 1
