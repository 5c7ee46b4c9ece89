"""The one estimate of a parser's cost (ingest/sizing.py) and the gzip trailer reader it shares
with the split plan (compression.trailer_size): every stated boundary on both sides, with the
expected sizes derived from the bytes written here."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem

from tb_plugin.compression import GZIP_MIN_BYTES, ISIZE_LIMIT, trailer_size
from tb_plugin.ingest.sizing import GZIP_EXPANSION, PARSER_MEMORY, json_size, peak_memory
from tb_plugin.settings import INFLATE_FLOOR
from tb_plugin.storage import FileRef

LOCAL = LocalFileSystem()


def _trailer(isize: int, length: int) -> io.BytesIO:
    """`length` bytes whose last four are `isize` little-endian."""
    return io.BytesIO(b"\x1f\x8b" + b"\0" * (length - 6) + isize.to_bytes(4, "little"))


def test_trailer_is_trusted_from_the_gzip_minimum_size_on():
    assert GZIP_MIN_BYTES == 10 + 8  # header + CRC32 + ISIZE
    assert trailer_size(_trailer(500, GZIP_MIN_BYTES - 1), GZIP_MIN_BYTES - 1) is None
    assert trailer_size(_trailer(500, GZIP_MIN_BYTES), GZIP_MIN_BYTES) == 500


def test_trailer_smaller_than_the_file_is_not_trusted():
    """An ISIZE below the file's size: the field wrapped (>= 4 GiB of JSON) or a truncated or
    multi-member file. Equal to the size is still trusted."""
    assert trailer_size(_trailer(99, 100), 100) is None
    assert trailer_size(_trailer(100, 100), 100) == 100


def test_trailer_of_a_file_of_4_gib_or_more_is_not_trusted():
    assert trailer_size(_trailer(ISIZE_LIMIT - 1, 100), ISIZE_LIMIT) is None
    assert trailer_size(_trailer(ISIZE_LIMIT - 1, 100), ISIZE_LIMIT - 1) == ISIZE_LIMIT - 1


def _gz(tmp_path: Path, name: str, payload: bytes) -> FileRef:
    path = tmp_path / name
    path.write_bytes(gzip.compress(payload))
    return FileRef(LOCAL, str(path), path.stat().st_size, "0")


def test_json_size_of_plain_gzip_misnamed_and_remote_files(tmp_path):
    payload = b'{"traceEvents": []}' * 5000  # 95,000 bytes of JSON
    packed = _gz(tmp_path, "w.pt.trace.json.gz", payload)
    assert json_size(packed) == len(payload) == 95_000
    plain = tmp_path / "w.pt.trace.json"
    plain.write_bytes(payload)
    assert json_size(FileRef(LOCAL, str(plain), 95_000, "0")) == 95_000
    misnamed = tmp_path / "plain.json.gz"  # not gzip inside: its own size
    misnamed.write_bytes(payload)
    assert json_size(FileRef(LOCAL, str(misnamed), 95_000, "0")) == 95_000
    assert json_size(FileRef(None, "/remote/w.json.gz", 1000, "0")) is None
    assert json_size(FileRef(None, "/remote/w.json", 1000, "0")) == 1000
    assert json_size(FileRef(LOCAL, str(tmp_path / "gone.json.gz"), 1000, "0")) is None


def test_peak_memory_is_the_parser_plus_the_json(tmp_path):
    payload = b"[1]," * 40_000  # 160,000 bytes
    packed = _gz(tmp_path, "w.pt.trace.json.gz", payload)
    assert peak_memory(packed, 100) == PARSER_MEMORY + 160_000
    assert peak_memory(FileRef(None, "/x/w.pt.trace.json", 5000, "0"), 100) == \
        PARSER_MEMORY + 5000


def test_unknown_gzip_counts_the_expansion_below_the_inflation_cap():
    size = 50 << 20  # 20 x 50 MiB = 1000 MiB < the cap 100 x 50 MiB
    remote = FileRef(None, "/x/w.pt.trace.json.gz", size, "0")
    assert peak_memory(remote, 100) == PARSER_MEMORY + GZIP_EXPANSION * size


def test_gzip_json_is_capped_by_the_inflation_limit_on_both_sides():
    """The cap is max(INFLATE_FLOOR, ratio x size): above the floor the ratio binds, below it
    the floor does."""
    size = 64 << 20
    remote = FileRef(None, "/x/w.pt.trace.json.gz", size, "0")
    assert peak_memory(remote, 10) == PARSER_MEMORY + 10 * size  # 640 MiB < 20 x size
    assert peak_memory(remote, 19) == PARSER_MEMORY + 19 * size
    assert peak_memory(remote, 21) == PARSER_MEMORY + GZIP_EXPANSION * size
    small = FileRef(None, "/x/s.pt.trace.json.gz", 1 << 20, "0")
    assert INFLATE_FLOOR > 2 * (1 << 20)
    assert peak_memory(small, 2) == PARSER_MEMORY + GZIP_EXPANSION * (1 << 20)  # floor: 256 MiB
    tiny_floor = FileRef(None, "/x/t.pt.trace.json.gz", 20 << 20, "0")  # 20x = 400 MiB
    assert peak_memory(tiny_floor, 2) == PARSER_MEMORY + INFLATE_FLOOR
