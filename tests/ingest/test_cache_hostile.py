"""Issue 32: the cache only trusts what it checked. Every byte read back from a cache, local or
shared (file://, memory://), is bounded before it is read, comes from a regular file (a FIFO
is never opened blocking, a device never read), from a name that was checked before it became
a path (no separator, no `..`, no symlink out of the cache root), and is decoded with a depth
limit. A bad entry costs that entry only: it is recomputed, and the recomputed one is read.
The shared cache obeys the payload budget as the local one does. The server and CLI sides are
tests/server/test_cache_hostile_http.py and tests/test_cache_hostile_cli.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import fsspec
import numpy as np
import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.cache_fs import (
    JSON_MAX_BYTES,
    MARKER,
    MARKER_MAX_BYTES,
    MAX_ENTRY_FILES,
    MAX_JSON_DEPTH,
    _marker,
    decode_json,
)
from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.memory_export import read_raw_timeline
from tb_plugin.ingest.snapshot import SnapshotError, read_snapshot
from tb_plugin.settings import MAX_INFLATE_RATIO_ENV, PAYLOAD_CACHE_ENV
from tb_plugin.storage import NotRegularFile, TooLarge, filesystem, open_ref, read_bounded
from tests.cluster.ranks import write_rank
from tests.ingest.tables import assert_same_table
from tests.support.hostile import deep

TB = 1 << 40


@pytest.fixture
def ref(tmp_path: Path):
    (tmp_path / "logs").mkdir()
    return open_ref(str(write_rank(tmp_path / "logs", 1, 4)))


# -- one bounded read for every whole-file read ------------------------------------------------


def test_read_bounded_stops_at_its_limit_on_both_sides(tmp_path: Path) -> None:
    fs, _ = filesystem(str(tmp_path))
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 100)
    assert read_bounded(fs, str(exact), 100) == b"x" * 100
    with pytest.raises(TooLarge):
        read_bounded(fs, str(exact), 99)
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as handle:
        handle.truncate(TB)  # a terabyte that costs no disk: refused by its size, never read
    with pytest.raises(TooLarge):
        read_bounded(fs, str(sparse), JSON_MAX_BYTES)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile):  # opened without blocking, then refused
        read_bounded(fs, str(fifo), 100)
    with pytest.raises(NotRegularFile):  # never read until memory runs out
        read_bounded(fs, "/dev/zero", JSON_MAX_BYTES)
    memory = fsspec.filesystem("memory")
    path = f"/{uuid.uuid4().hex}/m"
    memory.pipe_file(path, b"y" * 10)
    assert read_bounded(memory, path, 10) == b"y" * 10
    with pytest.raises(TooLarge):
        read_bounded(memory, path, 9)


@pytest.mark.parametrize("reader,error", [(read_raw_timeline, NotRegularFile),
                                          (read_snapshot, SnapshotError)])
def test_paths_given_to_the_readers_follow_the_same_rule(tmp_path: Path, reader, error) -> None:
    """A snapshot's refusal is its reader's own error (per file, shown in the view)."""
    fifo = tmp_path / "w.raw.json.gz"
    os.mkfifo(fifo)
    for source in (fifo, str(fifo), "/dev/zero"):
        with pytest.raises(error, match="not a regular file"):  # never blocks, never reads
            reader(source)


def test_json_depth_limit_on_both_sides() -> None:
    assert decode_json(deep(MAX_JSON_DEPTH)) == json.loads(deep(MAX_JSON_DEPTH))
    with pytest.raises(ValueError, match="deeper"):
        decode_json(deep(MAX_JSON_DEPTH + 1))
    # brackets inside strings are not nesting
    assert decode_json(b'{"a": "' + b"[" * 10_000 + b'"}') == {"a": "[" * 10_000}
    with pytest.raises(ValueError):
        decode_json(deep(100_000))


# -- the shared cache: what COMMIT.json names is checked before it is used ---------------------


def _shared(tmp_path: Path) -> tuple[TraceCache, Path]:
    root = tmp_path / "shared"
    return TraceCache(f"file://{root}"), root


def _marker_path(root: Path) -> Path:
    (marker,) = [p for p in root.rglob(MARKER) if p.parent.name != "payloads"]
    return marker


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink()
    os.symlink("/dev/zero", path)


def _sparse(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(TB)


def _nested(path: Path) -> None:
    path.write_bytes(deep(100_000))


def _rewrite(edit: Callable[[dict, Path], None]) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        marker = json.loads(path.read_bytes())
        edit(marker, path)
        path.write_text(json.dumps(marker))
    return tamper


def _generation_up(marker: dict, path: Path) -> None:
    # ab/<key>/../<key>/<generation>: the real files, reached through `..` (digests match)
    marker["generation"] = f"../{path.parent.name}/{marker['generation']}"


def _name_up(marker: dict, path: Path) -> None:
    marker["files"] = {f"../{marker['generation']}/{name}": digest
                       for name, digest in marker["files"].items()}


def _name_with_separator(marker: dict, path: Path) -> None:
    generation = path.parent / marker["generation"]
    (generation / "sub").mkdir()
    shutil.copy(generation / "manifest.json", generation / "sub" / "manifest.json")
    marker["files"]["sub/manifest.json"] = marker["files"].pop("manifest.json")


MARKER_TAMPERS = {"fifo": _fifo, "dev-zero": _zero, "sparse-terabyte": _sparse,
                  "nested": _nested, "generation-dotdot": _rewrite(_generation_up),
                  "name-dotdot": _rewrite(_name_up),
                  "name-separator": _rewrite(_name_with_separator)}


@pytest.mark.parametrize("tamper", MARKER_TAMPERS)
def test_a_bad_marker_is_ignored_and_the_entry_recomputed(tmp_path: Path, ref, tamper: str
                                                          ) -> None:
    cache, root = _shared(tmp_path)
    table = parse_trace(ref)
    cache.save_table(ref, table)
    assert_same_table(table, cache.load_table(ref))  # the untampered entry is read
    MARKER_TAMPERS[tamper](_marker_path(root))
    assert cache.load_table(ref) is None
    cache.save_table(ref, table)  # what a reader that found nothing does
    assert_same_table(table, cache.load_table(ref))


def _entry_file(root: Path, name: str) -> Path:
    marker = _marker_path(root)
    return marker.parent / json.loads(marker.read_bytes())["generation"] / name


def _outside_copy(path: Path) -> None:
    """The same bytes (its digest matches), but a symlink to a file outside the cache root."""
    outside = path.parents[4] / "outside.npz"
    shutil.copy(path, outside)
    path.unlink()
    os.symlink(outside, path)


ENTRY_TAMPERS = {"fifo": _fifo, "dev-zero": _zero, "sparse-terabyte": _sparse,
                 "symlink-out": _outside_copy}


@pytest.mark.parametrize("tamper", ENTRY_TAMPERS)
def test_a_bad_entry_file_is_ignored_and_recomputed(tmp_path: Path, ref, tamper: str) -> None:
    cache, root = _shared(tmp_path)
    table = parse_trace(ref)
    cache.save_table(ref, table)
    ENTRY_TAMPERS[tamper](_entry_file(root, "columns.npz"))
    assert cache.load_table(ref) is None
    cache.save_table(ref, table)
    assert_same_table(table, cache.load_table(ref))


PAYLOAD_TAMPERS = {"fifo": _fifo, "dev-zero": _zero, "sparse-terabyte": _sparse,
                   "nested": _nested}


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "local"])
@pytest.mark.parametrize("tamper", PAYLOAD_TAMPERS)
def test_a_bad_payload_is_recomputed(tmp_path: Path, ref, tamper: str, shared: bool) -> None:
    cache = _shared(tmp_path)[0] if shared else TraceCache(tmp_path / "local")
    root = tmp_path / ("shared" if shared else "local")
    assert cache.payload(ref, "k", lambda: {"a": [1]}) == {"a": [1]}
    (path,) = root.rglob("payloads/*.json")
    PAYLOAD_TAMPERS[tamper](path)
    assert cache.get_payload(ref, "k") is None
    assert cache.payload(ref, "k", lambda: {"a": [2]}) == {"a": [2]}  # recomputed, stored
    assert cache.get_payload(ref, "k") == {"a": [2]}


LOCAL_TAMPERS = {"fifo": _fifo, "dev-zero": _zero, "sparse-terabyte": _sparse}


@pytest.mark.parametrize("name", ["manifest.json", "columns.npz"])
@pytest.mark.parametrize("tamper", LOCAL_TAMPERS)
def test_a_bad_local_entry_file_is_recomputed(tmp_path: Path, ref, tamper: str, name: str
                                              ) -> None:
    cache = TraceCache(tmp_path / "local")
    table = parse_trace(ref)
    cache.save_table(ref, table)
    (path,) = (tmp_path / "local").rglob(name)
    LOCAL_TAMPERS[tamper](path)
    assert cache.load_table(ref) is None
    cache.save_table(ref, table)
    assert_same_table(table, cache.load_table(ref))


# -- the payload budget holds on a shared cache -------------------------------------------------


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_shared_payloads_obey_the_budget(tmp_path: Path, ref, scheme: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PAYLOAD_CACHE_ENV, "1")
    url = (f"file://{tmp_path / 'shared'}" if scheme == "file"
           else f"memory://torch-prof-test/{uuid.uuid4().hex}")
    cache = TraceCache(url)
    cache.payload(ref, "summary", lambda: {"pinned": True}, pinned=True)
    blob = {"x": "y" * (100 << 10)}  # ~100 KiB each: 10 fit in 1 MiB
    for i in range(300):
        assert cache.payload(ref, f"p{i}", lambda: blob) == blob
    fs, root = fsspec.core.url_to_fs(url)
    sizes = {path.rsplit("/", 1)[-1]: fs.info(path)["size"] for path in fs.find(root)
             if "/payloads/" in path}
    pinned = [name for name in sizes if name.startswith("pinned-")]
    others = [size for name, size in sizes.items() if not name.startswith("pinned-")]
    assert len(pinned) == 1 and cache.get_payload(ref, "summary", pinned=True) == {
        "pinned": True}  # never evicted
    # as many as fit (the newest is one of them), oldest written first out
    assert sum(others) <= (1 << 20) and len(others) == (1 << 20) // sizes[
        _payload_name("p299")]
    assert cache.get_payload(ref, "p299") == blob and cache.get_payload(ref, "p0") is None


def _payload_name(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest() + ".json"


# -- the marker's rules at their boundaries -------------------------------------------------------


def _a_marker(files: int = 2, generation: str = "a" * 32) -> dict:
    return {"generation": generation,
            "files": {f"f{i}.npz": "0" * 64 for i in range(files)}}


def test_marker_rules_on_both_sides() -> None:
    assert _marker(_a_marker()) == ("a" * 32, _a_marker()["files"])
    assert _marker(_a_marker(MAX_ENTRY_FILES)) is not None
    bad = [_a_marker(MAX_ENTRY_FILES + 1), _a_marker(0), _a_marker(generation="a" * 31),
           _a_marker(generation="a" * 33), _a_marker(generation="A" * 32), [], "x",
           {"generation": "a" * 32}]
    for name in ["a" * 129, ".hidden", "..", "a/b", "a\\b", "", "a b"]:
        bad.append({"generation": "a" * 32, "files": {name: "0" * 64}})
    bad.append({"generation": "a" * 32, "files": {"f.npz": "0" * 63}})
    bad.append({"generation": "a" * 32, "files": {"f.npz": 5}})
    assert [_marker(value) for value in bad] == [None] * len(bad)
    good_names = ["a" * 128, "_x", "manifest.json", "columns.npz", "x-1.y_2"]
    assert all(_marker({"generation": "a" * 32, "files": {name: "0" * 64}}) is not None
               for name in good_names)


def test_marker_size_limit_on_both_sides(tmp_path: Path) -> None:
    store = TraceCache(f"file://{tmp_path / 'shared'}").shared
    assert store is not None
    value = {"pad": "x" * (MARKER_MAX_BYTES - len(json.dumps({"pad": ""})))}
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "exact.json").write_text(json.dumps(value))
    (tmp_path / "shared" / "over.json").write_text(json.dumps(value) + " ")
    assert (tmp_path / "shared" / "exact.json").stat().st_size == MARKER_MAX_BYTES
    assert store.get_json("exact.json", MARKER_MAX_BYTES) == value
    assert store.get_json("over.json", MARKER_MAX_BYTES) is None


def _npz_of(path: Path, unpacked: int) -> None:
    """A compressed .npz whose one member unpacks to exactly `unpacked` bytes."""
    np.savez_compressed(path, a=np.zeros(unpacked - 128, dtype=np.uint8))
    with zipfile.ZipFile(path) as archive:
        assert sum(info.file_size for info in archive.infolist()) == unpacked


def test_npz_unpacked_limit_on_both_sides(tmp_path: Path, ref,
                                          monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(MAX_INFLATE_RATIO_ENV, "1")
    limit = ref.size + (64 << 20)  # the ratio times the trace's size, plus 64 MB
    cache = TraceCache(tmp_path / "local")
    for unpacked, refused in ((limit, False), (limit + 1, True)):
        cache.save_table(ref, parse_trace(ref))
        (columns,) = (tmp_path / "local").rglob("columns.npz")
        _npz_of(columns, unpacked)
        caplog.clear()
        assert cache.load_table(ref) is None  # not a table either way
        assert ("over the entry limit" in caplog.text) is refused, caplog.text
