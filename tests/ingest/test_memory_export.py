"""Reading `export_memory_timeline` raw exports (ingest/memory_export.py): record codes, streaming
across chunk boundaries, malformed and truncated files."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path

from tb_plugin.ingest import memory_export as me

P, OPT, IN, TMP, ACT, GRAD, AUTO, UNK = range(8)  # category indices
PRE, CREATE, INC, DESTROY = 1, 2, 3, 4
RECORDS = [
    [-1, PRE, 1000, P],
    [10_000, CREATE, 400, ACT],
    [12_000, DESTROY, -400, ACT],
    [15_000, INC, 64, GRAD],
]


def test_torch_action_and_category_codes() -> None:
    """The decoding tables match torch's `_memory_profiler` enums."""
    from torch.profiler import _memory_profiler as torch_mp

    assert {v: a.name for a, v in torch_mp._ACTION_TO_INDEX.items()} == me.ACTIONS
    names = [c.name if c is not None else "UNKNOWN" for c in torch_mp._CATEGORY_TO_INDEX]
    assert tuple(names) == me.CATEGORIES
    assert list(torch_mp._CATEGORY_TO_INDEX.values()) == list(range(len(me.CATEGORIES)))


def test_plain_and_gzipped_files_read_the_same(tmp_path: Path) -> None:
    text = json.dumps(RECORDS).encode()
    (tmp_path / "a.raw.json").write_bytes(text)
    (tmp_path / "b.raw.json.gz").write_bytes(gzip.compress(text))
    for name in ("a.raw.json", "b.raw.json.gz"):
        raw = me.read_raw_timeline(tmp_path / name)
        assert raw.ts_ns.tolist() == [-1, 10_000, 12_000, 15_000]
        assert raw.action.tolist() == [PRE, CREATE, DESTROY, INC]
        assert raw.bytes.tolist() == [1000, 400, -400, 64]
        assert raw.category.tolist() == [P, ACT, ACT, GRAD]
        assert raw.skipped == 0 and raw.messages == []


def test_malformed_records_are_skipped(tmp_path: Path) -> None:
    # kept: the first and the last; skipped: a string, action 9, three fields, category 12
    text = b'[[1000, 2, 10, 0], [2000, 2, "x", 0], [3000, 9, 5, 0], [4000, 2, 5],' \
           b' [5000, 2, 5, 12], [6000, 4, -10, 0]]'
    path = tmp_path / "bad.raw.json"
    path.write_bytes(text)
    raw = me.read_raw_timeline(path)
    assert raw.ts_ns.tolist() == [1000, 6000] and raw.bytes.tolist() == [10, -10]
    assert raw.skipped == 4
    assert raw.messages == ["Skipped 4 malformed memory-timeline record(s): each record must be "
                            "[ts_ns, action 1-4, bytes, category 0-7]."]


class _Trickle(io.RawIOBase):
    """A file that hands out a few bytes per read, so records straddle chunk boundaries."""

    def __init__(self, data: bytes, size: int = 7) -> None:
        self._data, self._size, self._pos = data, size, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        chunk = self._data[self._pos:self._pos + self._size]
        self._pos += len(chunk)
        return chunk


def test_streaming_across_chunk_boundaries() -> None:
    raw = me.read_raw_timeline(_Trickle(json.dumps(RECORDS).encode()))
    assert len(raw) == len(RECORDS) and raw.skipped == 0
    assert raw.ts_ns.tolist() == [r[0] for r in RECORDS]
    assert raw.bytes.tolist() == [r[2] for r in RECORDS]


def test_truncated_file_keeps_complete_records(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(RECORDS * 200).encode())
    path = tmp_path / "cut.raw.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    raw = me.read_raw_timeline(path)
    # the oracle: zlib's decompressed prefix, records ending in "]", a cut one after the last
    prefix = zlib.decompressobj(31).decompress(data[: len(data) * 2 // 3])
    complete = prefix.count(b"]")
    assert 0 < complete < len(RECORDS) * 200
    assert raw.ts_ns.tolist() == [r[0] for r in (RECORDS * 200)[:complete]]
    cut_record = b"[" in prefix[prefix.rfind(b"]") + 1:]
    assert raw.skipped == int(cut_record) and len(raw.messages) == 1 + int(cut_record)
    assert "truncated" in raw.messages[-1]


def test_empty_export(tmp_path: Path) -> None:
    path = tmp_path / "e.raw.json"
    path.write_bytes(b"[]")
    raw = me.read_raw_timeline(path)
    assert len(raw) == 0 and raw.skipped == 0 and raw.messages == []
