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

Never executing code from a file: the pickle is read by an unpickler whose `find_class` and
`persistent_load` refuse everything, so the only objects it can build are the plain ones a
pickle encodes by itself (dict, list, tuple, str, bytes, int, float, bool, None, set). Any
class or function reference is refused with `SnapshotError` before anything is built from it.
Bounded memory: a file (decompressed, for `.gz`) over `max_bytes` is refused before it is
unpickled past the limit, and the plain objects are turned into numpy columns and dropped at
once. Frames are interned: each distinct stack is stored once.
"""

from __future__ import annotations

import gzip
import io
import pickle
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from ..compression import GZIP_MAGIC
from ..storage import FileRef, open_local

#: Bumped whenever the reader's output changes; part of the snapshot's cache key.
SNAPSHOT_VERSION = 1
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


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain data only: every global (class, function) and persistent id is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(
            f"refused: the pickle refers to {str(module)[:80]}.{str(name)[:80]}; a memory "
            "snapshot holds only dicts, lists, tuples, strings, numbers, booleans and None "
            "(nothing from the file was run)")

    def persistent_load(self, pid: Any) -> Any:
        raise SnapshotError("refused: the pickle holds a persistent reference, which a memory "
                            "snapshot never does (nothing from the file was run)")


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


def read_snapshot(source: Any, max_bytes: int = DEFAULT_MAX_BYTES) -> Snapshot:
    """A snapshot from a FileRef, a path or an open binary file (plain or gzip'd pickle)."""
    if isinstance(source, FileRef):
        if source.size > max_bytes:
            raise SnapshotError(f"refused: the snapshot is {source.size >> 20} MiB, over the "
                                f"{max_bytes >> 20} MiB limit (TORCH_PROF_SNAPSHOT_MAX_MB)")
        with source.open() as handle:
            return _read(handle, max_bytes)
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        with open_local(source) as handle:
            return _read(handle, max_bytes)
    return _read(source, max_bytes)


def _read(handle: BinaryIO, max_bytes: int) -> Snapshot:
    head = handle.read(2)
    rest: BinaryIO = _Prefixed(head, handle)  # type: ignore[assignment]
    if head == GZIP_MAGIC[:2]:
        rest = gzip.GzipFile(fileobj=rest, mode="rb")  # type: ignore[assignment]
    stream = io.BufferedReader(_Capped(rest, max_bytes), 1 << 20)
    try:
        data = _PlainUnpickler(stream).load()
    except SnapshotError:
        raise
    except RecursionError as exc:
        raise SnapshotError("unreadable snapshot: nested too deeply") from exc
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, OSError, MemoryError, OverflowError, gzip.BadGzipFile) as exc:
        raise SnapshotError(f"not a readable pickle: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from exc
    return to_columns(data)


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

    def of(self, frames: Any) -> int:
        if not isinstance(frames, list) or not frames:
            return -1
        known = self._by_id.get(id(frames))
        if known is not None:
            return known
        key = tuple(_frame(f) for f in frames[:MAX_FRAMES])
        index = self._by_key.setdefault(key, len(self.stacks))
        if index == len(self.stacks):
            self.stacks.append(list(key))
        self._by_id[id(frames)] = index  # `frames` stays alive with the snapshot: ids are safe
        return index


def _frame(frame: Any) -> Frame:
    if not isinstance(frame, dict):
        return ("?", 0, str(frame)[:200])
    line = frame.get("line")
    return (str(frame.get("filename", "?"))[:500], line if isinstance(line, int) else 0,
            str(frame.get("name", "?"))[:500])


def _int(value: Any, default: int = -1) -> int:
    """An int64 from a plain number (bool and out-of-range values give `default`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return default
    return int(value) if -(1 << 63) < value < (1 << 63) else default


def to_columns(data: Any) -> Snapshot:
    """The columns of an unpickled snapshot dict (`SnapshotError` if it is not one)."""
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list) or \
            not isinstance(data.get("device_traces"), list):
        kind = type(data).__name__
        raise SnapshotError(f"not a memory snapshot: expected a dict with 'segments' and "
                            f"'device_traces' lists, found a {kind}")
    stacks = _Stacks()
    entries, skipped = _entries(data["device_traces"], stacks)
    segments, blocks, bad_segments = _segments(data["segments"], stacks)
    skipped += bad_segments
    messages = []
    if skipped:
        messages.append(f"Skipped {skipped} malformed snapshot record(s) (trace entries with "
                        "an unknown action, segments or blocks that are not dicts).")
    return Snapshot(entries, segments, blocks, stacks.stacks, skipped, messages)


def _entries(traces: list[Any], stacks: _Stacks) -> tuple[dict[str, np.ndarray], int]:
    rows: list[tuple[int, int, int, int, int, float, int, int]] = []
    skipped = 0
    for device, trace in enumerate(traces):
        if not isinstance(trace, list):
            skipped += 1
            continue
        for entry in trace:
            code = _ACTION_CODE.get(entry.get("action")) if isinstance(entry, dict) else None
            if code is None:
                skipped += 1
                continue
            time = entry.get("time_us")
            rows.append((device, code, _int(entry.get("addr")), _int(entry.get("size"), 0),
                         _int(entry.get("stream"), 0),
                         float(time) if isinstance(time, (int, float)) else np.nan,
                         stacks.of(entry.get("frames")), _int(entry.get("device_free"))))
    columns = list(zip(*rows)) if rows else [()] * len(ENTRY_COLUMNS)
    out = {name: np.asarray(values, dtype=np.float64 if name == "time_us" else np.int64)
           for name, values in zip(ENTRY_COLUMNS, columns)}
    return out, skipped


def _segments(segments: list[Any], stacks: _Stacks
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    seg_rows: list[tuple[int, int, int, int, int, int]] = []
    block_rows: list[tuple[int, int, int, int, int, int]] = []
    skipped = 0
    for segment in segments:
        if not isinstance(segment, dict):
            skipped += 1
            continue
        address = _int(segment.get("address"), 0)
        total = _int(segment.get("total_size"), 0)
        index = len(seg_rows)
        offset = address
        allocated = 0
        for block in segment.get("blocks") or []:
            if not isinstance(block, dict):
                skipped += 1
                continue
            size = _int(block.get("size"), 0)
            start = _int(block.get("address"), offset)
            state = _STATE_CODE.get(block.get("state"), 0)
            allocated += size if state else 0
            block_rows.append((index, start, size, _int(block.get("requested_size"), size),
                               state, stacks.of(block.get("frames"))))
            offset = start + size
        seg_rows.append((_int(segment.get("device"), 0), address, total,
                         _int(segment.get("allocated_size"), allocated),
                         _int(segment.get("stream"), 0),
                         int(segment.get("segment_type") != "small")))
    seg_columns = list(zip(*seg_rows)) if seg_rows else [()] * len(SEGMENT_COLUMNS)
    block_columns = list(zip(*block_rows)) if block_rows else [()] * len(BLOCK_COLUMNS)
    return ({n: np.asarray(v, dtype=np.int64) for n, v in zip(SEGMENT_COLUMNS, seg_columns)},
            {n: np.asarray(v, dtype=np.int64) for n, v in zip(BLOCK_COLUMNS, block_columns)},
            skipped)


def empty_snapshot() -> Snapshot:
    return to_columns({"segments": [], "device_traces": []})


def snapshot_device_name(index: int) -> str:
    """Snapshots come from the CUDA (or ROCm) caching allocator: device i is "GPU<i>"."""
    return f"GPU{index}"


