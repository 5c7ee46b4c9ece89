"""Streaming gzip decompression with ISA-L (python-isal): several times faster than zlib.

We drive a raw decompressobj ourselves rather than a GzipFile so that (a) concatenated gzip
members are all read and (b) a truncated stream gives back everything before the cut.
"""

from __future__ import annotations

from collections.abc import Iterator

try:  # ISA-L is an install dependency; zlib keeps the parser working where it is missing
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - exercised only on exotic platforms
    import zlib as _zlib

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31


class GzipStream:
    """Feed compressed chunks, get decompressed chunks; `finished` tells if the stream ended."""

    def __init__(self) -> None:
        self._obj = _zlib.decompressobj(_GZIP_WBITS)
        self.finished = False
        self.error: str | None = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data and self.error is None:
            if self.finished:  # another gzip member follows the previous one
                if not data.startswith(GZIP_MAGIC):
                    return  # trailing garbage after a complete stream is ignored
                self._obj = _zlib.decompressobj(_GZIP_WBITS)
                self.finished = False
            try:
                out = self._obj.decompress(data)
            except _zlib.error as exc:
                self.error = f"corrupt gzip data: {exc}"
                return
            if out:
                yield out
            if self._obj.eof:
                self.finished = True
                data = self._obj.unused_data
            else:
                data = b""


def decompressor() -> GzipStream:
    return GzipStream()
