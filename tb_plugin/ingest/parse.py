"""One parse of a trace stream: scanner, growing columns and status -> `TraceTable`.

`TraceParse` is shared by the sequential parse (loader.parse_trace) and the N-process split
parse (parallel.py), which runs one in each process and merges them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Optional

import msgspec

from ..settings import (
    INFLATE_FLOOR,
    MAX_INFLATE_RATIO_ENV,
    MAX_TOKEN_ENV,
    PARSE_DEADLINE_ENV,
    Settings,
)
from .columns import ColumnBuilder
from .decode import BatchDecoder, Event, recover_batch
from .interning import MAX_STRING_CHARS
from .scanner import EventStreamScanner, ScanResult, TokenTooLarge
from .schema import (
    TABLE_COLUMNS,
    LoadState,
    ParseStatus,
    TraceMetadata,
    TraceTable,
    empty_frame,
)

log = logging.getLogger(__name__)

#: Called with the number of (decompressed) bytes read so far.
ProgressCallback = Callable[[int], None]


#: Problems (malformed events...) listed by message; later ones only count. A cap per file, not
#: per batch, so that the messages never depend on where the batches were cut.
MAX_PROBLEM_MESSAGES = 5
PROBLEM = "problem"  # a recorded `TraceParse.problem`, as opposed to a `LoadState`
#: Most bytes the scanner is fed at a time, so at most one batch of events: a chunk read is
#: cut into pieces of this size. A 2 MB batch's Structs and column temporaries freed at once
#: made glibc give the heap top back and fault it in again for the next batch: 1 MB pieces cut
#: the one-core parse's page faults 3x and its CPU ~10% (README, "Parse speed").
SCAN_PIECE = 1 << 20


class ParseLimit(Exception):
    """A configured limit stopped the parse; the message names it and how to raise it."""


@dataclass(frozen=True)
class Limits:
    """What one parse may cost (see `tb_plugin.settings`): every limit stops the parse with a
    message naming its variable, and the events read before it are kept."""

    max_bytes: int  # decompressed bytes of the file
    max_token: int  # bytes of one event (or of the header before the events)
    deadline_s: float  # seconds of parsing
    ratio: int = 0  # the gzip ratio max_bytes came from (0: none), for the message

    @classmethod
    def for_file(cls, compressed_size: int = 0, config: Optional[Settings] = None) -> Limits:
        """The limits `config` sets (default: the defaults; the entry point that parses,
        `loader.parse_trace`, passes the process's settings)."""
        config = config if config is not None else Settings()
        ratio = config.max_inflate_ratio
        return cls(max(INFLATE_FLOOR, ratio * compressed_size) if compressed_size
                   else 1 << 62, config.max_token, float(config.parse_deadline_s), ratio)


class TraceParse:
    """The state of one parse: scanner, growing columns and status.

    `record=True` (the second-half process of a split parse) also keeps every status change in
    order, so that the first half can replay them after its own and end with exactly the
    status a sequential parse would have.
    """

    def __init__(self, scanner: Optional[EventStreamScanner] = None, record: bool = False,
                 limits: Optional[Limits] = None) -> None:
        self.status = ParseStatus()
        self.builder = ColumnBuilder()
        self.limits = limits or Limits.for_file()
        self.scanner = scanner or EventStreamScanner(BatchDecoder(), self.limits.max_token)
        self.problems = 0  # problems seen, listed or not
        self.record: Optional[list[tuple[str, str]]] = [] if record else None
        self.stopped = False  # a limit stopped the parse (see `stop`)
        self._deadline = time.monotonic() + self.limits.deadline_s

    def feed(self, chunk: bytes) -> None:
        """Scan one chunk; raises ParseLimit when a limit is reached (`stop` records it)."""
        self.status.bytes_read += len(chunk)
        if self.status.bytes_read > self.limits.max_bytes:
            raise ParseLimit(
                f"the file inflates to more than {self.limits.max_bytes >> 20} MB, over "
                f"{self.limits.ratio}x its compressed size (a gzip bomb?); limit "
                f"{MAX_INFLATE_RATIO_ENV}={self.limits.ratio}")
        if time.monotonic() > self._deadline:
            raise ParseLimit(f"parsing took longer than {self.limits.deadline_s:.0f} s; limit "
                             f"{PARSE_DEADLINE_ENV}={self.limits.deadline_s:.0f}")
        try:
            with memoryview(chunk) as view:
                for start in range(0, len(chunk), SCAN_PIECE):
                    for batch, decoded in self.scanner.feed(view[start:start + SCAN_PIECE]):
                        self._add_batch(batch, decoded)
        except TokenTooLarge as exc:
            raise ParseLimit(f"{exc}; limit {MAX_TOKEN_ENV}={self.limits.max_token >> 20}"
                             ) from exc

    def stop(self, limit: ParseLimit) -> None:
        """A limit stopped the parse: keep the events read so far, say which limit and how to
        raise it (state TRUNCATED, or ERROR when no event was read)."""
        self.stopped = True
        found = self.scanner.result.found_events
        kept = "the events before are shown" if found else "nothing was read"
        self.warn(LoadState.TRUNCATED if found else LoadState.ERROR,
                  f"stopped: {limit}; {kept} (raise the limit to read the whole file)")

    def out_of_memory(self) -> None:
        """The process ran out of memory: keep the events read so far (state TRUNCATED, or ERROR
        when none was), and name the limits that bound a parse's memory."""
        self.stopped = True
        found = self.scanner.result.found_events
        kept = "the events before are shown" if found else "nothing was read"
        self.warn(LoadState.TRUNCATED if found else LoadState.ERROR,
                  f"out of memory after {self.status.bytes_read >> 20} MB of JSON; {kept}: free "
                  f"memory, or lower {MAX_TOKEN_ENV} and {MAX_INFLATE_RATIO_ENV}")

    def consume(self, chunks: Iterable[bytes], progress: Optional[ProgressCallback]) -> None:
        """Feed the rest of the stream and close it."""
        for chunk in chunks:
            self.feed(chunk)
            if progress is not None:
                progress(self.status.bytes_read)
        self.close()

    def close(self) -> None:
        """The stream ended: process what the scanner still holds."""
        for batch, decoded in self.scanner.close():
            self._add_batch(batch, decoded)

    def cut_at_boundary(self) -> bool:
        """The stream pauses here: cut what is buffered; True if that is between two events."""
        for batch, decoded in self.scanner.cut_at_boundary():
            self._add_batch(batch, decoded)
        return self.scanner.at_event_boundary

    def warn(self, state: str, message: str) -> None:
        self.status.warn(state, message)
        if self.record is not None:
            self.record.append((state, message))

    def problem(self, message: str) -> None:
        """One malformed event: listed while under the cap, counted (state PARTIAL) always."""
        self.problems += 1
        if self.problems > MAX_PROBLEM_MESSAGES:
            self.status.raise_to(LoadState.PARTIAL)
            return
        self.status.warn(LoadState.PARTIAL, message)
        if self.record is not None:
            self.record.append((PROBLEM, message))

    def replay(self, record: list[tuple[str, str]], problems: int) -> None:
        """Apply another parse's recorded status changes (the next part of the same stream)."""
        for state, message in record:
            if state == PROBLEM:
                self.problem(message)
            else:
                self.warn(state, message)
        unlisted = problems - sum(1 for state, _ in record if state == PROBLEM)
        if unlisted > 0:
            self.problems += unlisted
            self.status.raise_to(LoadState.PARTIAL)

    def truncated_gzip(self, why: str, trailer_only: bool = False) -> None:
        if trailer_only:
            self.warn(LoadState.PARTIAL, f"{why}: the gzip trailer (checksum or length) is "
                      "damaged; every event was read, but the file may be corrupt")
            return
        self.status.cut_off = True
        self.warn(LoadState.TRUNCATED, f"{why}: the file was cut off (still being written, or "
                  "the job was killed); the complete events before the cut are shown")

    def _add_batch(self, batch: bytes, decoded: Optional[list[Event]]) -> None:
        if decoded is not None:
            self.builder.add(decoded)
            return
        events, skipped, problems = recover_batch(batch)
        self.builder.add(events)
        self.status.skipped_events += skipped
        for problem in problems:
            self.problem(problem)

    def table(self) -> TraceTable:
        """The finished table: metadata, the final state and messages, the built columns."""
        scan = self.scanner.result
        metadata = _metadata(scan, self.status)
        _judge(scan, self.builder, self.status, self.stopped)
        metadata.process_metadata = self.builder.process_metadata
        return _build_table(self.builder, metadata, self.status)


def _judge(scan: ScanResult, builder: ColumnBuilder, status: ParseStatus, stopped: bool
           ) -> None:
    """Turn what the scan saw into the worker's state and messages."""
    if status.state == LoadState.ERROR:
        return
    if not scan.found_events:
        status.cut_off = status.cut_off or ends_mid_token(scan.header)
        status.warn(LoadState.ERROR, _why_no_events(scan.header))
        return
    if not scan.events_closed and not stopped:
        # an unfinished array: cut off unless its last bytes are already invalid JSON
        status.cut_off = status.cut_off or not malformed(scan.leftover)
        status.warn(LoadState.TRUNCATED, "the trace ends in the middle of its events (the file "
                    "was cut off); the complete events before the cut are shown")
    if status.skipped_events and builder.event_rows == 0 and not builder.process_metadata:
        status.warn(LoadState.ERROR, f"none of the {status.skipped_events} elements of the "
                    "events array is a trace event: this is not a Chrome trace")
        return
    if status.skipped_events:
        status.warn(LoadState.PARTIAL, f"{status.skipped_events} malformed events were skipped")
    if builder.negative_durations:
        status.warn(LoadState.PARTIAL, f"{builder.negative_durations} events had a negative "
                    "duration (or one beyond 1e17 us); they were read as zero-length")
    if builder.missing_timestamps:
        status.warn(LoadState.PARTIAL, f"{builder.missing_timestamps} events had no numeric 'ts' "
                    "(or one beyond 1e17 us) and were skipped")
    cut = sum(interner.cut() for interner in builder.interners.values())
    if cut:
        status.warn(LoadState.PARTIAL, f"{cut} strings (event names, shapes or call stacks) "
                    f"were longer than {MAX_STRING_CHARS} characters and were cut to that length")
    if builder.event_rows == 0 and status.state == LoadState.OK:
        status.warn(LoadState.OK, "the trace has no events")


def ends_mid_token(document: bytes) -> bool:
    """The bytes are empty or a valid JSON prefix that stops mid-value (a file still being
    written), rather than JSON that goes wrong before its end (a broken file). JSON nested
    too deeply to decode is a broken file: no trace is."""
    text = document.strip()
    if not text:
        return True
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        return "truncated" in str(exc)
    except (RecursionError, UnicodeDecodeError):
        return False
    return False


def malformed(document: bytes) -> bool:
    """The bytes go wrong as JSON before their end (not merely a prefix of a valid value), or
    are nested too deeply to decode (no trace is)."""
    try:
        msgspec.json.decode(document.strip() or b"0")
    except msgspec.DecodeError as exc:
        return "truncated" not in str(exc)
    except (RecursionError, UnicodeDecodeError):
        return True
    return False


def _why_no_events(document: bytes) -> str:
    if not document.strip():
        return "the file is empty"
    try:
        msgspec.json.decode(document)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return "not valid JSON, or cut off before its events began"
    except RecursionError:
        return "the JSON is nested too deeply to read, and has no 'traceEvents' array"
    return "no 'traceEvents' array: this is JSON but not a Chrome trace"


_KNOWN_TOP_LEVEL = {
    "schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "Framework",
    "traceEvents",
}


def _metadata(scan: ScanResult, status: ParseStatus) -> TraceMetadata:
    """Decode the document minus its events: header + `]` + trailer is a small valid object."""
    if scan.bare_array or not scan.found_events:
        return TraceMetadata()
    tail = scan.trailer if scan.events_closed else b"}"
    document = None
    for candidate in (scan.header + b"]" + tail, scan.header + b"]}"):
        try:
            document = msgspec.json.decode(candidate)
            break
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            continue
    if not isinstance(document, dict):
        if scan.events_closed:
            status.warn(LoadState.PARTIAL, "the trace's top-level metadata is not valid JSON "
                        "(or is nested too deeply); the events are shown")
        return TraceMetadata()
    device_properties = document.get("deviceProperties")
    base_time = document.get("baseTimeNanoseconds")
    extra = {k: v for k, v in document.items() if k not in _KNOWN_TOP_LEVEL and _small(v)}
    return TraceMetadata(
        schema_version=document.get("schemaVersion"),
        device_properties=[p for p in device_properties if isinstance(p, dict)]
        if isinstance(device_properties, list) else [],
        distributed_info=document.get("distributedInfo")
        if isinstance(document.get("distributedInfo"), dict) else None,
        base_time_ns=int(base_time) if isinstance(base_time, (int, float)) else None,
        framework=document.get("Framework") if isinstance(document.get("Framework"), str)
        else None,
        extra=extra,
    )


def _small(value: Any) -> bool:
    return len(msgspec.json.encode(value)) <= 4096


def _build_table(builder: ColumnBuilder, metadata: TraceMetadata, status: ParseStatus
                 ) -> TraceTable:
    frames = {}
    for table, columns in TABLE_COLUMNS.items():
        try:
            frames[table] = builder.build(table, columns)
        except ValueError as exc:  # defensive: never lose the worker over one bad table
            log.exception("building table %s failed", table)
            status.warn(LoadState.PARTIAL, f"could not build the {table} table: {exc}")
            frames[table] = empty_frame(columns)
    return TraceTable(metadata=metadata, status=status, **frames)
