"""Cache or parse (tb_plugin/load.py): a hit is served from the cache without reading the file,
a miss parses and stores, a disabled cache parses every time."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import fsspec
import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.ingest import LoadState
from tb_plugin.load import load_memory_export, load_trace
from tb_plugin.storage import open_ref
from tests.ingest.logdirs import TRACE
from tests.ingest.tables import assert_same_table

#: Same length as TRACE, another operator name: swapped in under the same file identity.
SWAPPED = TRACE.replace(b'"op"', b'"oq"')


def _same_identity_swap(path: Path, data: bytes) -> None:
    """New bytes of the same size and mtime: only a read of the file can tell the difference."""
    stat = path.stat()
    assert len(data) == stat.st_size
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_hit_returns_the_stored_table(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    cache = TraceCache(tmp_path / "cache")
    first = load_trace(str(path), cache=cache)
    _same_identity_swap(path, SWAPPED)
    again = load_trace(str(path), cache=cache)
    assert again.events["name"].tolist() == ["op"]  # from the cache: the file says "oq"
    assert_same_table(first, again)


def test_miss_parses_and_stores(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    cache = TraceCache(tmp_path / "cache")
    table = load_trace(str(path), cache=cache)
    assert table.events["name"].tolist() == ["op"]
    assert_same_table(table, cache.load_table(open_ref(str(path))))


def test_a_failed_parse_is_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(b'{"lr": 0.1}')
    cache = TraceCache(tmp_path / "cache")
    assert load_trace(str(path), cache=cache).status.state == LoadState.ERROR
    assert cache.load_table(open_ref(str(path))) is None


@pytest.mark.parametrize("how", ["use_cache=False", "disabled cache"])
def test_cache_off_parses_every_time(tmp_path: Path, how: str) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    options = {"use_cache": False} if how == "use_cache=False" else {"cache": TraceCache(None)}
    assert load_trace(str(path), **options).events["name"].tolist() == ["op"]
    _same_identity_swap(path, SWAPPED)
    assert load_trace(str(path), **options).events["name"].tolist() == ["oq"]


RECORDS = b"[[-1, 1, 1000, 0], [10, 2, 400, 4], [12, 4, -400, 4]]"


def test_export_cache_hit_does_not_read_the_file(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/tp_export_hit/w.raw.json.gz", gzip.compress(RECORDS))
    ref = open_ref("memory://tp_export_hit/w.raw.json.gz")
    cache = TraceCache(tmp_path / "cache")
    try:
        first = load_memory_export(ref, cache=cache)
        assert first.ts_ns.tolist() == [-1, 10, 12] and first.bytes.tolist() == [1000, 400, -400]
        fs.rm("/tp_export_hit", recursive=True)
        again = load_memory_export(ref, cache=cache)  # the file is gone: only the cache has it
        assert again.ts_ns.tolist() == first.ts_ns.tolist()
        assert again.bytes.tolist() == first.bytes.tolist()
        with pytest.raises(FileNotFoundError):
            load_memory_export(ref, use_cache=False)
    finally:
        if fs.exists("/tp_export_hit"):
            fs.rm("/tp_export_hit", recursive=True)


def test_export_from_a_local_path(tmp_path: Path) -> None:
    path = tmp_path / "w.raw.json"
    path.write_bytes(RECORDS)
    cache = TraceCache(tmp_path / "cache")
    assert load_memory_export(path, cache=cache).bytes.tolist() == [1000, 400, -400]
    _same_identity_swap(path, RECORDS.replace(b"1000", b"2000"))
    assert load_memory_export(str(path), cache=cache).bytes.tolist() == [1000, 400, -400]
    assert load_memory_export(path, use_cache=False).bytes.tolist() == [2000, 400, -400]
