"""compression.GzipStream: members, split headers, trailing garbage, corruption, truncation."""

from __future__ import annotations

import gzip
import os

import pytest

from tb_plugin.compression import GZIP_MAGIC, GzipStream, decompressor

TEXT = b'{"traceEvents": [' + b", ".join(b'{"n": %d}' % i for i in range(2000)) + b"]}"


def _feed(data: bytes, piece: int) -> tuple[bytes, object]:
    stream = decompressor()
    out = b"".join(b"".join(stream.feed(data[i:i + piece])) for i in range(0, len(data), piece))
    return out + b"".join(stream.close()), stream


def test_one_member_in_any_feed_size() -> None:
    packed = gzip.compress(TEXT)
    assert packed.startswith(GZIP_MAGIC)
    for piece in (1, 7, 4096, len(packed)):
        out, stream = _feed(packed, piece)
        assert out == TEXT and stream.finished and stream.error is None


def test_concatenated_members_are_all_read() -> None:
    # `cat a.gz b.gz`: gzip -d gives both; a member's magic may be cut between two feeds
    packed = gzip.compress(b"first,") + gzip.compress(b"second")
    for piece in (1, 2, 3, len(packed)):
        out, stream = _feed(packed, piece)
        assert out == b"first,second" and stream.finished


def test_trailing_garbage_after_a_complete_stream_is_ignored() -> None:
    out, stream = _feed(gzip.compress(b"payload") + b"\x00\x00junk", 4096)
    assert out == b"payload" and stream.finished and stream.error is None


def test_truncated_stream_gives_what_came_before() -> None:
    packed = gzip.compress(os.urandom(1000) + TEXT)  # random bytes: the output is not tiny
    cut = packed[: len(packed) - 300]
    out, stream = _feed(cut, 512)
    assert not stream.finished and stream.error is None
    expected = gzip.decompress(packed)  # the whole stream, of which `out` must be a prefix
    assert 0 < len(out) < len(expected) and expected.startswith(out)


def test_corrupt_data_sets_an_error_and_stops() -> None:
    packed = bytearray(gzip.compress(TEXT))
    packed[2] = 7  # compression method 7: only 8 (deflate) exists
    out, stream = _feed(bytes(packed), 4096)
    assert out == b"" and stream.error is not None and stream.error.startswith("corrupt gzip")
    assert not stream.finished


@pytest.mark.parametrize("split_at", [0, 1, 2, 3])
def test_multi_member_gzip_split_inside_the_second_header(split_at: int) -> None:
    first, second = gzip.compress(b'{"traceEvents": ['), gzip.compress(b"]}")
    data = first + second
    cut = len(first) + split_at  # the read boundary falls inside the second member's magic
    stream = GzipStream()
    out = b"".join([*stream.feed(data[:cut]), *stream.feed(data[cut:]), *stream.close()])
    assert out == b'{"traceEvents": []}' and stream.finished


def test_trailing_garbage_after_a_complete_gzip_stream_is_ignored() -> None:
    stream = GzipStream()
    out = b"".join([*stream.feed(gzip.compress(b"[]") + b"xx"), *stream.feed(b"\x1f\x8bzz"),
                    *stream.close()])
    assert out == b"[]" and stream.finished and stream.error is None


def test_corrupt_trailer_keeps_every_byte() -> None:
    # issue 19 item 12: a damaged CRC at the very end used to cost the whole output
    packed = bytearray(gzip.compress(TEXT))
    packed[-6] ^= 0xFF  # inside the CRC32 of the trailer
    for piece in (7, len(packed)):
        out, stream = _feed(bytes(packed), piece)
        assert out == TEXT
        assert stream.trailer_error and not stream.finished and stream.error is not None


def test_a_bomb_is_handed_out_in_bounded_pieces() -> None:
    # 64 MB of spaces in one ~64 KB member: every piece is at most the asked size
    packed = gzip.compress(b" " * (64 << 20), 9)
    assert len(packed) < 200_000
    stream = decompressor()
    sizes = [len(piece) for piece in stream.feed(packed, 1 << 20)]
    sizes += [len(piece) for piece in stream.close(1 << 20)]
    assert max(sizes) == 1 << 20 and sum(sizes) == 64 << 20 and stream.finished
