"""Streaming gzip decompression with ISA-L (python-isal): several times faster than zlib.

We drive a raw decompressobj ourselves rather than a GzipFile so that (a) concatenated gzip
members are all read and (b) a truncated stream gives back everything before the cut.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO, Optional

try:  # ISA-L is an install dependency; zlib keeps the parser working where it is missing
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - exercised only on exotic platforms
    import zlib as _zlib

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31
OUT_CHUNK = 2 << 20  # most decompressed bytes handed out at a time
TRAILER = 8  # a gzip member ends with CRC32 and ISIZE, 4 bytes each
GZIP_MIN_BYTES = 18  # a 10-byte header and the trailer: nothing shorter is a gzip file
ISIZE_LIMIT = 1 << 32  # ISIZE holds the inflated size mod 2**32


def trailer_size(handle: BinaryIO, compressed_size: int) -> Optional[int]:
    """The inflated size a gzip file states in its last member's trailer (ISIZE, its last 4
    bytes), when it can be trusted: None for a file too short to be gzip, one of 4 GiB or
    more, and an ISIZE smaller than the file (the JSON is >= 4 GiB and the field wrapped, or
    the file is truncated or multi-member). `handle` is seekable; it is left at the end."""
    if compressed_size < GZIP_MIN_BYTES or compressed_size >= ISIZE_LIMIT:
        return None
    handle.seek(-4, os.SEEK_END)
    isize = int.from_bytes(handle.read(4), "little")
    return isize if isize >= compressed_size else None


class GzipStream:
    """Feed compressed chunks, get decompressed chunks; `finished` tells if the stream ended."""

    def __init__(self) -> None:
        self._obj = _zlib.decompressobj(_GZIP_WBITS)
        self.finished = False
        self.error: str | None = None
        self._between_members = b""  # start of a next member's header cut by a read boundary
        self._trailing_garbage = False
        self._held = b""
        self.trailer_error = False  # only the trailer (CRC, length) was corrupt

    def feed(self, data: bytes, max_out: int = OUT_CHUNK) -> Iterator[bytes]:
        """Decompressed pieces of at most `max_out` bytes each: a small input that inflates to
        gigabytes (a gzip bomb) is yielded piece by piece, never held whole.

        The last TRAILER bytes fed are held back until more data or `close()`: they may be the
        gzip trailer (CRC and length), whose check raises in the call that reads it and would
        lose that call's output; held back, a corrupt trailer costs no event."""
        data = self._held + data
        self._held = data[-TRAILER:]
        yield from self._inflate(data[:-TRAILER], max_out)

    def close(self, max_out: int = OUT_CHUNK) -> Iterator[bytes]:
        """The end of the input: inflate the held-back bytes (the trailer, usually)."""
        held, self._held = self._held, b""
        before = self.error
        yield from self._inflate(held, max_out)
        if self.error is not None and before is None:
            self.trailer_error = True

    def _inflate(self, data: bytes, max_out: int) -> Iterator[bytes]:
        while data and self.error is None and not self._trailing_garbage:
            if self.finished:  # another gzip member may follow the previous one
                data = self._between_members + data
                self._between_members = b""
                if len(data) < len(GZIP_MAGIC) and GZIP_MAGIC.startswith(data):
                    self._between_members = data  # wait for the rest of the magic
                    return
                if not data.startswith(GZIP_MAGIC):
                    self._trailing_garbage = True  # ignored after a complete stream
                    return
                self._obj = _zlib.decompressobj(_GZIP_WBITS)
                self.finished = False
            try:
                out = self._obj.decompress(data, max_out)
            except _zlib.error as exc:
                self.error = f"corrupt gzip data: {exc}"
                return
            if out:
                yield out
            if self._obj.eof:
                self.finished = True
                data = self._obj.unused_data
            else:
                data = self._obj.unconsumed_tail


def decompressor() -> GzipStream:
    return GzipStream()
