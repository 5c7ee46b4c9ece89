"""Cut a Chrome-trace JSON byte stream into batches of complete events, without parsing it whole.

A trace is `{"...": ..., "traceEvents": [ {event}, {event}, ... ], "...": ...}` or, from the
legacy autograd export, a bare `[ {event}, ... ]`. We never hold the document as Python objects:
each chunk of bytes is scanned with numpy for the structural characters outside strings, which
gives the nesting depth at every bracket, so we can cut right after the last complete event and
hand that slice to the decoder. Everything before the events array (header) and after it
(trailer) is small and kept as bytes for the metadata.

A stream that ends inside the events array is a truncated file (a job killed mid-write): the
complete events before the cut have already been emitted, which is exactly what we want to keep.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN_OBJ, _CLOSE_OBJ, _OPEN_ARR, _CLOSE_ARR = ord("{"), ord("}"), ord("["), ord("]")
_COMMA = ord(",")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*$')
_HEADER_LIMIT = 64 << 20  # a header this large means there is no events array to find


class TraceFormatError(ValueError):
    """The bytes are not a Chrome trace we can read."""


class TokenTooLarge(ValueError):
    """One JSON token (an event) is longer than the configured limit: the scan stops there."""


@dataclass
class Structure:
    """Brackets outside strings in a buffer: their offsets and the depth just after each."""

    offsets: np.ndarray
    chars: np.ndarray
    depth_after: np.ndarray


def scan_structure(buf: bytes | bytearray | memoryview, depth0: int) -> Structure:
    """Vectorised bracket scan of `buf`, which must start outside any string at depth `depth0`.

    Quotes toggle "inside a string" unless escaped by an odd run of backslashes; brackets inside
    strings are ignored. Cost: a few numpy passes over the bytes, no Python loop per character
    (the only loop is over quotes preceded by a backslash, which are rare in traces).
    """
    data = np.frombuffer(buf, dtype=np.uint8)
    quotes = _real_quotes(data)
    # One comparison at a time: a single temporary the size of the buffer, not four (a
    # buffer holding one huge event may be hundreds of MB).
    brackets = np.sort(np.concatenate([
        np.flatnonzero(data == char) for char in (_OPEN_OBJ, _CLOSE_OBJ, _OPEN_ARR, _CLOSE_ARR)
    ]))
    # A bracket is outside strings when an even number of real quotes precede it.
    outside = (np.searchsorted(quotes, brackets) & 1) == 0
    brackets = brackets[outside]
    chars = data[brackets]
    step = np.where((chars == _OPEN_OBJ) | (chars == _OPEN_ARR), 1, -1).astype(np.int64)
    return Structure(brackets, chars, depth0 + np.cumsum(step))


def _real_quotes(data: np.ndarray) -> np.ndarray:
    """Offsets of the quotes that open or close strings (not escaped ones): a quote is escaped
    when the run of backslashes right before it is odd (vectorised: runs found from the
    backslashes' offsets, so a payload full of `\\"` costs no Python loop)."""
    quotes = np.flatnonzero(data == _QUOTE)
    candidates = quotes[(quotes > 0) & (data[np.maximum(quotes - 1, 0)] == _BACKSLASH)]
    if not candidates.size:
        return quotes
    backslashes = np.flatnonzero(data == _BACKSLASH)
    run_starts = backslashes[np.r_[True, np.diff(backslashes) != 1]]
    starts = run_starts[np.searchsorted(run_starts, candidates - 1, side="right") - 1]
    escaped = candidates[((candidates - starts) & 1) == 1]
    return np.setdiff1d(quotes, escaped, assume_unique=True)


@dataclass
class ScanResult:
    """What the scanner saw besides the event batches."""

    header: bytes = b""  # the document up to and including the events array's "["
    trailer: bytes = b""  # the document after the events array's "]"
    bare_array: bool = False  # legacy export: the document is the events array itself
    events_closed: bool = False  # the events array was closed: the file is complete there
    found_events: bool = False
    leftover: bytes = b""  # bytes of an incomplete event at the end of a truncated stream
    batch_count: int = 0


class EventStreamScanner:
    """Feed chunks, get batches; then `close()` for the rest, and read `result`.

    Fast path: cut at the last `}, {` of the buffer and let `try_decode` (the strict JSON
    decoder the caller runs anyway) check the cut: a cut inside a string or a nested value can
    never decode, so a successful decode proves it. Only when it fails (a false candidate, a
    malformed event, or the end of the array) do we pay for the exact numpy bracket scan.
    Batches are yielded as (bytes, decoded-or-None); None means the batch is cut exactly but
    does not decode as a whole, and the caller recovers event by event.
    """

    def __init__(self, try_decode: Callable[[bytes], Any] = lambda batch: None,
                 max_token: int = _HEADER_LIMIT << 2) -> None:
        self.result = ScanResult()
        self._try_decode = try_decode
        self._mode = "header"
        self._buf = bytearray()
        self._array_depth = 0  # depth inside the events array (between its elements)
        self.max_token = max_token
        # While one token is longer than the buffer, cutting is retried only once the buffer
        # has doubled since the last try: one huge value costs O(n), not O(n^2) rescans.
        self._retry_at = 0

    def feed(self, chunk: bytes) -> Iterator[tuple[bytes, Any]]:
        self._buf += chunk
        if self._mode == "header":
            self._find_events_array()
        if self._mode == "events":
            yield from self._cut_fast()
            if len(self._buf) > self.max_token:  # checked at every chunk: never overshoots
                # cut the events that are complete first (the doubling schedule may not have
                # tried since): only the one in progress counts against the limit
                yield from self._cut_exact()
                if self._mode == "events" and len(self._buf) > self.max_token:
                    self._hold_one_token()
        self._drain_trailer()

    def close(self) -> Iterator[tuple[bytes, Any]]:
        """Process what is left at the end of the stream (the last events and the trailer)."""
        if self._mode == "events":
            yield from self._cut_exact()
        self._drain_trailer()
        if self._mode == "header":
            self.result.header = bytes(self._buf)
        elif self._mode == "events":
            self.result.leftover = bytes(self._buf).strip().lstrip(b",").strip()
        self._buf.clear()

    # -- splitting one file across several processes (see parallel.py) ------------------------

    @classmethod
    def resume(cls, try_decode: Callable[[bytes], Any], array_depth: int,
               max_token: int = _HEADER_LIMIT << 2) -> EventStreamScanner:
        """A scanner for a stream that starts at an event inside the events array (the second
        part of a split file); `array_depth` is the header's: 1 bare array, 2 object form."""
        scanner = cls(try_decode, max_token)
        scanner._mode = "events"
        scanner._array_depth = array_depth
        scanner.result.found_events = True
        return scanner

    def feed_header(self, chunk: bytes) -> bool:
        """Look for the events array only, cutting no batch: True once it is found."""
        if self._mode == "header":
            self._buf += chunk
            self._find_events_array()
        return self._mode != "header"

    @property
    def array_depth(self) -> int:
        return self._array_depth

    def cut_at_boundary(self) -> Iterator[tuple[bytes, Any]]:
        """The stream pauses at a candidate event boundary: cut exactly what is buffered.

        Afterwards `at_event_boundary` tells whether the pause point really was between two
        events of the array. Either way feeding on yields the same events as an uninterrupted
        scan: an exact cut only ever falls between complete events, like any other cut.
        """
        if self._mode == "header":  # look now, whatever the doubling schedule says
            self._retry_at = 0
            self._find_events_array()
        if self._mode == "events":
            yield from self._cut_exact()

    @property
    def at_event_boundary(self) -> bool:
        """In the events array, with only the separator of the next event buffered."""
        return self._mode == "events" and not self._buf.strip(b" \t\r\n,")

    def _drain_trailer(self) -> None:
        if self._mode == "trailer":
            self.result.trailer += bytes(self._buf)
            self._buf.clear()

    def _find_events_array(self) -> None:
        text = self._buf
        start = _skip_ws(text)
        if start >= len(text):
            del text[:]  # only whitespace so far: a whitespace bomb costs no memory
            return
        if start > 3:
            del text[:start]
            start = 0
        if len(text) < self._retry_at:
            return
        if text[start] == _OPEN_ARR:  # legacy bare array: the document is the events array
            self._enter_events(start, array_depth=1, bare=True)
            return
        if text[start] != _OPEN_OBJ:
            raise TraceFormatError("not a JSON object or array (is this a Chrome trace?)")
        structure = scan_structure(text, 0)
        opens = np.flatnonzero((structure.chars == _OPEN_ARR) & (structure.depth_after == 2))
        for i in opens.tolist():
            offset = int(structure.offsets[i])
            if _EVENTS_KEY.search(bytes(text[max(0, offset - 64) : offset])):
                self._enter_events(offset, array_depth=2, bare=False)
                return
        limit = min(_HEADER_LIMIT, self.max_token)
        if len(text) > limit:
            raise TraceFormatError(f"no 'traceEvents' array in the first {limit >> 20} MB")
        self._retry_at = 2 * len(text)

    def _enter_events(self, open_offset: int, array_depth: int, bare: bool) -> None:
        self.result.header = bytes(self._buf[: open_offset + 1])
        self.result.bare_array = bare
        self.result.found_events = True
        del self._buf[: open_offset + 1]
        self._array_depth = array_depth
        self._mode = "events"
        self._retry_at = 0

    def _cut_fast(self) -> Iterator[tuple[bytes, Any]]:
        if len(self._buf) < self._retry_at:
            return
        cut = _last_boundary(self._buf)
        if cut:
            batch = _as_batch(self._buf, cut)
            decoded = self._try_decode(batch) if batch else None
            if decoded is not None:
                del self._buf[:cut]
                self.result.batch_count += 1
                yield batch, decoded
                return
        yield from self._cut_exact()

    def _cut_exact(self) -> Iterator[tuple[bytes, Any]]:
        depth = self._array_depth
        structure = scan_structure(self._buf, depth)
        closes_array = np.flatnonzero(structure.depth_after == depth - 1)
        if closes_array.size:  # the events array ends in this buffer
            batch_end = int(structure.offsets[closes_array[0]])
        else:
            element_ends = structure.offsets[
                (structure.depth_after == depth) & (structure.chars == _CLOSE_OBJ)
            ]
            batch_end = int(element_ends[-1]) + 1 if element_ends.size else 0
        batch = _as_batch(self._buf, batch_end)
        if batch:
            self.result.batch_count += 1
            yield batch, self._try_decode(batch)
        elif not closes_array.size:  # no event ends in the buffer: one long event (or spaces)
            self._hold_one_token()
            return
        self._retry_at = 0
        if closes_array.size:
            self.result.events_closed = True
            self._mode = "trailer"
            del self._buf[: batch_end + 1]
        else:
            del self._buf[:batch_end]


    def _hold_one_token(self) -> None:
        """Keep buffering the event in progress, within the limit; separators before it are
        dropped (the buffer always starts between two events of the array)."""
        del self._buf[: _LEADING_SEPARATORS.match(self._buf).end()]
        if len(self._buf) > self.max_token:
            raise TokenTooLarge(f"one event is longer than {self.max_token >> 20} MB")
        self._retry_at = 2 * len(self._buf)


_BOUNDARY_TAIL = re.compile(rb"\}\s*,\s*$")
_BOUNDARY_SEARCH = 1 << 20  # look for a cut only in the last MB of the buffer


def _last_boundary(buf: bytearray) -> int:
    """Offset just after the last `}` that is followed by `, {` (a candidate event boundary)."""
    floor = max(0, len(buf) - _BOUNDARY_SEARCH)
    pos = len(buf)
    while True:
        pos = buf.rfind(b"{", floor, pos)
        if pos <= floor:
            return 0
        match = _BOUNDARY_TAIL.search(buf, max(floor, pos - 256), pos)
        if match:
            return match.start() + 1


_SEPARATORS = b" \t\r\n,"
_LEADING_SEPARATORS = re.compile(rb"[ \t\r\n,]*")


def _as_batch(buf: bytearray, end: int) -> bytes:
    """`buf[:end]`, events separated by commas, as one JSON array (the only copy made)."""
    start = _LEADING_SEPARATORS.match(buf, 0, end).end()
    while end > start and buf[end - 1] in _SEPARATORS:
        end -= 1
    if end <= start:
        return b""
    with memoryview(buf) as view:
        return b"".join((b"[", view[start:end], b"]"))


_WHITESPACE = re.compile(rb"[ \t\r\n]*")


def _skip_ws(buf: bytearray) -> int:
    """Offset of the first byte after a UTF-8 byte order mark and JSON whitespace."""
    return _WHITESPACE.match(buf, 3 if buf[:3] == b"\xef\xbb\xbf" else 0).end()


def split_batch_elements(batch: bytes) -> list[bytes]:
    """Split one batch `[a, b, ...]` at its top-level commas (for per-event error recovery)."""
    inner = batch[1:-1]
    data = np.frombuffer(inner, dtype=np.uint8)
    commas = np.flatnonzero(data == _COMMA)
    commas = commas[(np.searchsorted(_real_quotes(data), commas) & 1) == 0]
    structure = scan_structure(inner, 0)
    before = np.searchsorted(structure.offsets, commas) - 1
    depth_after = np.append(structure.depth_after, 0)  # no bracket at all (`[1,2,3]`): depth 0
    depth = np.where(before >= 0, depth_after[np.maximum(before, 0)], 0)
    bounds = [0, *(commas[depth == 0] + 1).tolist(), len(inner) + 1]
    pieces = (inner[start : end - 1].strip() for start, end in zip(bounds, bounds[1:]))
    return [piece for piece in pieces if piece]


