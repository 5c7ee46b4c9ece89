"""Read a CUDA caching-allocator snapshot (`torch.cuda.memory._dump_snapshot`) into columns.

The file is `pickle.dump(torch.cuda.memory._snapshot())`: a dict with
- `segments`: the allocator's segments at dump time (`address`, `total_size`,
  `allocated_size`, `stream`, `segment_type`, `device`, ...), each with its `blocks` in address
  order (`address`, `size`, `requested_size`, `state` in active_allocated /
  active_awaiting_free / inactive, `frames`);
- `device_traces`: per device index, the allocator's recent actions (`action` in alloc,
  free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap,
  oom, snapshot; `addr`, `size`, `stream`, `time_us`, `frames`, `device_free` for oom);
- frames are dicts `filename`, `line`, `name`; pool ids are tuples. Older snapshots have no
  `time_us`, and `torch.cuda._memory_viz._profile_to_snapshot` writes blocks without addresses.

Never executing code from a file: the pickle is read by a pure stack machine over the file's
bytes (`plain_pickle.read_plain`), which knows only the opcodes of plain data (dict, list,
tuple, set, str, bytes, int, float, bool, None). Any class or function reference is refused
with `SnapshotError` before anything is built from it.
Bounded memory: a file (decompressed, for `.gz`) over `max_bytes` is refused before it is read
past the limit; the reader's own allocations (memo, objects, nesting, lengths) are bounded by
`PickleLimits`; records repeated by reference (one segment listed a million times) may give at
most as many rows as the pickle built objects (`to_columns`' `max_rows`); the plain objects
are turned into numpy columns and dropped at once. Frames are interned: each distinct stack is
stored once. A malformed value costs its record (skipped and counted), never the file.
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ..compression import GZIP_MAGIC
from ..storage import FileRef, NotRegularFile, OutsideLogdir, open_ref, open_to_serve
from .plain_pickle import PickleError, PickleLimits, PickleRefused, read_plain

#: Bumped whenever the reader's output changes; part of the snapshot's cache key.
SNAPSHOT_VERSION = 2
#: Default size limit of a snapshot file (decompressed), bytes: unpickled, a snapshot takes
#: about five times its file size in memory until it is turned into columns.
DEFAULT_MAX_BYTES = 1 << 30
ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot")
ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE = 0, 1, 2, 3, 4
SEGMENT_MAP, SEGMENT_UNMAP, OOM, SNAPSHOT = 5, 6, 7, 8
BLOCK_STATES = ("inactive", "active_allocated", "active_awaiting_free")
#: Frames kept per stack (innermost first, as the allocator writes them).
MAX_FRAMES = 64
_ACTION_CODE = {name: code for code, name in enumerate(ACTIONS)}
_STATE_CODE = {name: code for code, name in enumerate(BLOCK_STATES)}
ENTRY_COLUMNS = ("device", "action", "addr", "size", "stream", "time_us", "stack",
                 "device_free")
SEGMENT_COLUMNS = ("device", "address", "total_size", "allocated_size", "stream", "large")
BLOCK_COLUMNS = ("segment", "address", "size", "requested_size", "state", "stack")


class SnapshotError(ValueError):
    """The file is refused (not plain data, too big) or is not a memory snapshot."""


Frame = tuple[str, int, str]


@dataclass
class Snapshot:
    """Columns of one snapshot. `entries`: trace entries in file order per device (int64, and
    float64 `time_us`, NaN without one; `stack` indexes `stacks`, -1 for none); `segments` and
    `blocks` (`segment` indexes the segment rows) as of dump time."""

    entries: dict[str, np.ndarray]
    segments: dict[str, np.ndarray]
    blocks: dict[str, np.ndarray]
    stacks: list[list[Frame]]
    skipped: int = 0
    messages: list[str] = field(default_factory=list)

    @property
    def has_time(self) -> bool:
        time = self.entries["time_us"]
        return bool(len(time)) and bool(np.isfinite(time).all()) and bool((time > 0).all())


class _Capped(io.RawIOBase):
    """A read-only stream that refuses to deliver more than `limit` bytes."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self._handle, self._left, self._limit = handle, limit, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            raise SnapshotError(f"refused: the snapshot is over {self._limit >> 20} MiB "
                                "(TORCH_PROF_SNAPSHOT_MAX_MB raises the limit)")
        self._left -= len(data)
        buffer[:len(data)] = data
        return len(data)


def read_snapshot(source: Any, max_bytes: int = DEFAULT_MAX_BYTES,
                  limits: PickleLimits = PickleLimits()) -> Snapshot:
    """A snapshot from a FileRef, a path or an open binary file (plain or gzip'd pickle).

    The same rule as for traces: a regular file only (a FIFO, device or socket is refused
    without blocking), its size checked before it is read, and a FileRef found under a local
    logdir is refused when its real path, symlinks resolved at open time, is outside it."""
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        source = open_ref(os.fsdecode(source))
    if not isinstance(source, FileRef):
        return _read(source, max_bytes, limits)
    if source.size > max_bytes:
        raise SnapshotError(f"refused: the snapshot is {source.size >> 20} MiB, over the "
                            f"{max_bytes >> 20} MiB limit (TORCH_PROF_SNAPSHOT_MAX_MB)")
    try:
        handle = open_to_serve(source)
    except OutsideLogdir as exc:
        raise SnapshotError(f"refused: {exc}") from None
    except NotRegularFile as exc:
        raise SnapshotError(f"refused: {exc}") from None
    with handle:
        return _read(handle, max_bytes, limits)


def _read(handle: BinaryIO, max_bytes: int, limits: PickleLimits) -> Snapshot:
    head = handle.read(2)
    rest: BinaryIO = _Prefixed(head, handle)  # type: ignore[assignment]
    if head == GZIP_MAGIC[:2]:
        rest = gzip.GzipFile(fileobj=rest, mode="rb")  # type: ignore[assignment]
    stream = io.BufferedReader(_Capped(rest, max_bytes), 1 << 20)
    try:
        buffer = stream.read()
    except SnapshotError:
        raise
    except (OSError, EOFError, ValueError, gzip.BadGzipFile) as exc:
        raise SnapshotError(f"not a readable pickle: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from exc
    try:
        data, objects = read_plain(buffer, limits)
    except PickleRefused as exc:
        raise SnapshotError(str(exc)) from None
    except PickleError as exc:
        raise SnapshotError(f"not a readable pickle: {exc}") from None
    del buffer
    return to_columns(data, max_rows=objects)


class _Prefixed(io.RawIOBase):
    """`head` then the rest of `handle` (the sniffed bytes, given back)."""

    def __init__(self, head: bytes, handle: BinaryIO) -> None:
        self._head, self._handle = head, handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._handle.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


# --- plain objects -> columns ---------------------------------------------------------------

class _Stacks:
    """Distinct stacks, each stored once; the same frames list object is looked up by id."""

    def __init__(self) -> None:
        self.stacks: list[list[Frame]] = []
        self._by_key: dict[tuple[Frame, ...], int] = {}
        self._by_id: dict[int, int] = {}
        self._frames: dict[int, Frame] = {}  # frame dicts shared by reference, read once

    def of(self, frames: Any) -> int:
        if not isinstance(frames, list) or not frames:
            return -1
        known = self._by_id.get(id(frames))
        if known is not None:
            return known
        seen = self._frames
        key = tuple(seen.get(id(f)) or seen.setdefault(id(f), _frame(f))
                    for f in frames[:MAX_FRAMES])
        index = self._by_key.setdefault(key, len(self.stacks))
        if index == len(self.stacks):
            self.stacks.append(list(key))
        self._by_id[id(frames)] = index  # `frames` stays alive with the snapshot: ids are safe
        return index


def _frame(frame: Any) -> Frame:
    if not isinstance(frame, dict):
        return ("?", 0, f"<{type(frame).__name__}>")
    line, filename, name = frame.get("line"), frame.get("filename"), frame.get("name")
    return (filename[:500] if type(filename) is str else "?",  # noqa: E721 - exact types
            line if type(line) is int and -(1 << 63) < line < (1 << 63) else 0,  # noqa: E721
            name[:500] if type(name) is str else "?")  # noqa: E721


def _code(codes: dict[str, int], value: Any) -> int | None:
    return codes.get(value) if isinstance(value, str) else None


def _float(value: Any) -> float:
    """A float64 from a plain number (NaN for anything else, an int too big for a float too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return np.nan
    try:
        return float(value)
    except OverflowError:
        return np.nan


def _int(value: Any, default: int = -1) -> int:
    """An int64 from a plain number (bool and out-of-range values give `default`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return default
    return int(value) if -(1 << 63) < value < (1 << 63) else default


class _Rows:
    """Counts the records read against `limit`: a pickle that lists one object many times by
    reference describes more records than it holds objects, and is refused."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self) -> None:
        if self.left is None:
            return
        self.left -= 1
        if self.left < 0:
            raise SnapshotError("refused: the snapshot repeats the same records by reference "
                                "(more trace entries, segments and blocks than the pickle "
                                "holds objects)")


def to_columns(data: Any, max_rows: int | None = None) -> Snapshot:
    """The columns of an unpickled snapshot dict (`SnapshotError` if it is not one).
    `max_rows`: at most this many records (entries, segments, blocks) are read, None for no
    limit."""
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list) or \
            not isinstance(data.get("device_traces"), list):
        kind = type(data).__name__
        raise SnapshotError(f"not a memory snapshot: expected a dict with 'segments' and "
                            f"'device_traces' lists, found a {kind}")
    stacks, rows = _Stacks(), _Rows(max_rows)
    entries, skipped = _entries(data["device_traces"], stacks, rows)
    segments, blocks, bad_segments = _segments(data["segments"], stacks, rows)
    skipped += bad_segments
    messages = []
    if skipped:
        messages.append(f"Skipped {skipped} malformed snapshot record(s) (trace entries with "
                        "an unknown action, segments or blocks that are not dicts, segments "
                        "without a list of blocks, sizes, addresses or devices that are not "
                        "integers in range).")
    return Snapshot(entries, segments, blocks, stacks.stacks, skipped, messages)


class _Bad(ValueError):
    """A record with a size, address or device out of range: skipped and counted."""


#: Sizes (bytes) are integers in [0, 2**48): 256 TiB, over any device's memory.
MAX_SIZE = 1 << 48
#: Addresses are integers in [0, 2**62): a block's end (address + size) fits int64.
MAX_ADDRESS = 1 << 62
#: Device indexes are integers in [0, 2**16).
MAX_DEVICE = 1 << 16


def _bounded(value: Any, default: int, limit: int) -> int:
    """`value` if it is an int in [0, limit), `default` if it is missing (None), else `_Bad`."""
    if value is None:
        return default
    if type(value) is not int or not 0 <= value < limit:  # noqa: E721 - bool is not a size
        raise _Bad(value)
    return value


def _entries(traces: list[Any], stacks: _Stacks, counter: _Rows
             ) -> tuple[dict[str, np.ndarray], int]:
    rows: list[tuple[int, int, int, int, int, float, int, int]] = []
    skipped = 0
    for device, trace in enumerate(traces):
        if not isinstance(trace, list):
            skipped += 1
            continue
        for entry in trace:
            counter.take()
            code = _code(_ACTION_CODE, entry.get("action")) if isinstance(entry, dict) else None
            try:
                if code is None:
                    raise _Bad(entry)
                row = (device, code, _bounded(entry.get("addr"), -1, MAX_ADDRESS),
                       _bounded(entry.get("size"), 0, MAX_SIZE), _int(entry.get("stream"), 0),
                       _float(entry.get("time_us")), stacks.of(entry.get("frames")),
                       _bounded(entry.get("device_free"), -1, MAX_SIZE))
            except _Bad:
                skipped += 1
                continue
            rows.append(row)
    columns = list(zip(*rows)) if rows else [()] * len(ENTRY_COLUMNS)
    out = {name: np.asarray(values, dtype=np.float64 if name == "time_us" else np.int64)
           for name, values in zip(ENTRY_COLUMNS, columns)}
    return out, skipped


def _segments(segments: list[Any], stacks: _Stacks, counter: _Rows
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    seg_rows: list[tuple[int, int, int, int, int, int]] = []
    block_rows: list[tuple[int, int, int, int, int, int]] = []
    skipped = 0
    for segment in segments:
        counter.take()
        try:
            row, blocks, bad = _segment(segment, len(seg_rows), stacks, counter)
        except _Bad:
            skipped += 1
            continue
        seg_rows.append(row)
        block_rows.extend(blocks)
        skipped += bad
    seg_columns = list(zip(*seg_rows)) if seg_rows else [()] * len(SEGMENT_COLUMNS)
    block_columns = list(zip(*block_rows)) if block_rows else [()] * len(BLOCK_COLUMNS)
    return ({n: np.asarray(v, dtype=np.int64) for n, v in zip(SEGMENT_COLUMNS, seg_columns)},
            {n: np.asarray(v, dtype=np.int64) for n, v in zip(BLOCK_COLUMNS, block_columns)},
            skipped)


def _segment(segment: Any, index: int, stacks: _Stacks, counter: _Rows
             ) -> tuple[tuple[int, ...], list[tuple[int, ...]], int]:
    """One segment's row, its blocks' rows and how many of its blocks were skipped."""
    blocks = segment.get("blocks", []) if isinstance(segment, dict) else None
    if not isinstance(blocks, list):
        raise _Bad(segment)
    address = _bounded(segment.get("address"), 0, MAX_ADDRESS)
    total = _bounded(segment.get("total_size"), 0, MAX_SIZE)
    device = _bounded(segment.get("device"), 0, MAX_DEVICE)
    offset, allocated, skipped = address, 0, 0
    rows: list[tuple[int, ...]] = []
    for block in blocks:
        counter.take()
        try:
            if not isinstance(block, dict):
                raise _Bad(block)
            size = _bounded(block.get("size"), 0, MAX_SIZE)
            start = _bounded(block.get("address"), offset, MAX_ADDRESS)
            requested = _bounded(block.get("requested_size"), size, MAX_SIZE)
        except _Bad:
            skipped += 1
            continue
        state = _code(_STATE_CODE, block.get("state")) or 0
        allocated += size if state else 0
        rows.append((index, start, size, requested, state, stacks.of(block.get("frames"))))
        offset = min(start + size, MAX_ADDRESS - 1)
    row = (device, address, total, _bounded(segment.get("allocated_size"), allocated, MAX_SIZE),
           _int(segment.get("stream"), 0), int(segment.get("segment_type") != "small"))
    return row, rows, skipped


def empty_snapshot() -> Snapshot:
    return to_columns({"segments": [], "device_traces": []})


def snapshot_device_name(index: int) -> str:
    """Snapshots come from the CUDA (or ROCm) caching allocator: device i is "GPU<i>"."""
    return f"GPU{index}"


