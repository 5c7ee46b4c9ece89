"""storage.py: file references and their identity, and the decompressing byte stream."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import fsspec
import pytest

from tb_plugin import storage
from tb_plugin.storage import CHUNK_SIZE, file_ref, filesystem, iter_decompressed, open_ref


def test_local_ref_name_url_size_and_identity(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(b"0123456789")
    os.utime(path, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    ref = open_ref(str(path))
    assert ref.name == "w.pt.trace.json" and ref.size == 10
    assert ref.url == f"file://{path}"
    assert ref.identity() == f"file://{path}|10|1500000000.0"
    with ref.open() as handle:
        assert handle.read() == b"0123456789"


def test_identity_changes_with_size_or_mtime(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"abc")
    before = open_ref(str(path)).identity()
    os.utime(path, ns=(2, 2))
    touched = open_ref(str(path)).identity()
    path.write_bytes(b"abcd")
    os.utime(path, ns=(2, 2))
    grown = open_ref(str(path)).identity()
    assert len({before, touched, grown}) == 3


@pytest.mark.parametrize("info, stamp", [
    ({"size": 5, "mtime": 12.5}, "12.5"),
    ({"size": 5, "LastModified": "2024-01-01"}, "2024-01-01"),  # s3
    ({"size": 5, "ETag": '"abc"'}, '"abc"'),
    ({"size": 5, "last_modified": 7}, "7"),
    ({"size": 5, "created": 3.0}, "3.0"),  # memory://
    ({"size": None}, ""),
])
def test_file_ref_stamp_from_whatever_the_filesystem_reports(info: dict, stamp: str) -> None:
    fs = fsspec.filesystem("memory")
    ref = file_ref(fs, "/x/y.json", info)
    assert ref.mtime == stamp and ref.size == (info["size"] or 0)
    assert ref.url == "memory:///x/y.json"


def test_filesystem_strips_trailing_slashes(tmp_path: Path) -> None:
    fs, path = filesystem(str(tmp_path) + "/")
    assert path == str(tmp_path) and fs.protocol[0] == "file"
    assert filesystem("memory://logs/run/")[1] == "/logs/run"


def test_memory_filesystem_ref() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/tp_storage/a.json", b"hello")
    try:
        ref = open_ref("memory://tp_storage/a.json")
        assert ref.size == 5 and ref.name == "a.json"
        with ref.open() as handle:
            assert handle.read() == b"hello"
    finally:
        fs.rm("/tp_storage", recursive=True)


def test_plain_bytes_pass_through_in_read_sized_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "CHUNK_SIZE", 4)
    chunks = list(iter_decompressed(io.BytesIO(b"0123456789")))
    assert chunks == [b"0123", b"4567", b"89"]


def test_gzip_output_is_cut_to_chunk_size() -> None:
    # 2 MB of gzip inflates to ~20 MB; no piece handed on may exceed CHUNK_SIZE
    data = b"a" * (3 * CHUNK_SIZE + 5)
    chunks = list(iter_decompressed(io.BytesIO(gzip.compress(data))))
    assert b"".join(chunks) == data
    assert max(len(c) for c in chunks) == CHUNK_SIZE and len(chunks) >= 4


def test_truncated_gzip_calls_back_after_the_readable_part() -> None:
    data = os.urandom(50_000)
    packed = gzip.compress(data)
    reasons: list[tuple[str, bool]] = []

    def note(why: str, trailer_only: bool) -> None:
        reasons.append((why, trailer_only))

    out = b"".join(iter_decompressed(io.BytesIO(packed[:-100]), on_truncated_gzip=note))
    assert data.startswith(out) and len(out) < len(data)
    assert reasons == [("the gzip stream ends early", False)]
    reasons.clear()
    assert b"".join(iter_decompressed(io.BytesIO(packed), on_truncated_gzip=note)) == data
    assert reasons == []


def test_empty_file_yields_nothing() -> None:
    assert list(iter_decompressed(io.BytesIO(b""))) == []
