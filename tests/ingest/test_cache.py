"""The on-disk cache: parsed tables, parsed memory exports and payloads, keyed by file identity;
corrupt entries are discarded; a disabled or unwritable cache only costs speed."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tb_plugin import cache as cache_module
from tb_plugin.cache import TraceCache, default_cache
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.memory_export import read_raw_timeline
from tb_plugin.settings import CACHE_DIR_ENV
from tb_plugin.storage import open_ref
from tests.ingest.logdirs import TRACE
from tests.ingest.tables import assert_same_table


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    return path


def test_table_roundtrip_and_corruption(tmp_path: Path) -> None:
    ref = open_ref(str(_trace(tmp_path)))
    cache = TraceCache(tmp_path / "cache")
    assert cache.load_table(ref) is None
    table = parse_trace(ref)
    cache.save_table(ref, table)
    assert_same_table(table, cache.load_table(ref))
    (entry,) = (tmp_path / "cache").glob("*/*")
    assert sorted(p.name for p in entry.iterdir()) == ["columns.npz", "manifest.json"]
    (entry / "columns.npz").write_bytes(b"garbage")  # corrupt: discarded, not trusted
    assert cache.load_table(ref) is None
    assert not entry.exists()


def test_entries_follow_the_file_identity(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    cache = TraceCache(tmp_path / "cache")
    before = open_ref(str(path))
    cache.save_table(before, parse_trace(before))
    os.utime(path, ns=(1, 1))  # same bytes, another mtime: another file as far as we know
    assert cache.load_table(open_ref(str(path))) is None
    assert cache.load_table(before) is not None


def _export(tmp_path: Path) -> Path:
    records = b"[[-1, 1, 1000, 0], [10, 2, 400, 4], [11, 9, 5, 0], [12, 4, -400, 4]]"
    path = tmp_path / "w.raw.json.gz"
    data = gzip.compress(records)
    path.write_bytes(data[:-8])  # no gzip trailer: read as truncated
    return path


def test_export_roundtrip_keeps_records_and_messages(tmp_path: Path) -> None:
    ref = open_ref(str(_export(tmp_path)))
    raw = read_raw_timeline(ref)
    assert raw.skipped == 1 and len(raw.messages) == 2  # action 9, and the missing trailer
    cache = TraceCache(tmp_path / "cache")
    assert cache.load_export(ref) is None
    cache.save_export(ref, raw)
    again = cache.load_export(ref)
    for name in ("ts_ns", "action", "bytes", "category"):
        assert getattr(again, name).dtype == np.int64
        assert getattr(again, name).tolist() == getattr(raw, name).tolist()
    assert again.ts_ns.tolist() == [-1, 10, 12]
    assert (again.skipped, again.messages) == (raw.skipped, raw.messages)


def test_export_and_table_entries_of_one_file_are_apart(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    ref = open_ref(str(path))
    cache = TraceCache(tmp_path / "cache")
    table = parse_trace(ref)
    cache.save_table(ref, table)
    cache.save_export(ref, read_raw_timeline(_export(tmp_path)))
    assert len(list((tmp_path / "cache").glob("*/*"))) == 2
    assert_same_table(table, cache.load_table(ref))
    assert cache.load_export(ref).ts_ns.tolist() == [-1, 10, 12]


def test_corrupt_export_entry_is_discarded(tmp_path: Path) -> None:
    ref = open_ref(str(_export(tmp_path)))
    cache = TraceCache(tmp_path / "cache")
    cache.save_export(ref, read_raw_timeline(ref))
    (entry,) = (tmp_path / "cache").glob("*/*")
    manifest = json.loads((entry / "manifest.json").read_text())
    (entry / "manifest.json").write_text(json.dumps({**manifest, "identity": "another file"}))
    assert cache.load_export(ref) is None and not entry.exists()


def test_payloads_are_computed_once(tmp_path: Path) -> None:
    ref = open_ref(str(_trace(tmp_path)))
    cache, calls = TraceCache(tmp_path / "cache"), []
    compute = lambda: calls.append(1) or {"x": [1, 2]}  # noqa: E731
    assert cache.payload(ref, "view=a", compute) == {"x": [1, 2]}
    assert cache.payload(ref, "view=a", compute) == {"x": [1, 2]}
    assert len(calls) == 1
    assert cache.payload(ref, "view=b", compute) == {"x": [1, 2]}
    assert len(calls) == 2


def test_disabled_cache_stores_nothing(tmp_path: Path) -> None:
    ref = open_ref(str(_trace(tmp_path)))
    cache, calls = TraceCache(None), []
    cache.save_table(ref, parse_trace(ref))
    assert not cache.enabled and cache.load_table(ref) is None
    compute = lambda: calls.append(1) or 7  # noqa: E731
    assert cache.payload(ref, "k", compute) == cache.payload(ref, "k", compute) == 7
    assert len(calls) == 2


def test_unwritable_cache_only_costs_speed(tmp_path: Path) -> None:
    ref = open_ref(str(_trace(tmp_path)))
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    cache = TraceCache(not_a_folder)
    cache.save_table(ref, parse_trace(ref))  # logged, not raised
    cache.save_export(ref, read_raw_timeline(_export(tmp_path)))
    assert cache.load_table(ref) is None and cache.load_export(ref) is None
    assert not_a_folder.read_text() == "x"


@pytest.mark.parametrize("value", ["off", "OFF", "none", "0", "false"])
def test_default_cache_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, value)
    monkeypatch.setattr(cache_module, "_default", None)  # the process-wide one, read afresh
    assert not default_cache().enabled


def test_default_cache_folder_from_the_environment(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "here"))
    monkeypatch.setattr(cache_module, "_default", None)
    assert default_cache().root == tmp_path / "here"
    assert default_cache() is default_cache()
