"""Hostile pickles, written opcode by opcode (see `pickletools`): each makes CPython's own
unpickler allocate on the file's say, while holding nothing that refers to code."""

from __future__ import annotations

import pickle
import struct
from typing import Any

from tests.ingest.snapshots import hand_snapshot

PROTO2 = b"\x80\x02"
STOP = b"."
NONE = b"N"
MARK = b"("
LIST = b"l"
EMPTY_LIST = b"]"
APPEND = b"a"
#: The memo index of the bomb: CPython's unpickler grows its memo table to hold it (2 GiB of
#: pointers, then more while resizing).
BOMB_INDEX = 1 << 28


def long_binput(index: int) -> bytes:
    return b"r" + struct.pack("<I", index)


def long_binget(index: int) -> bytes:
    return b"j" + struct.pack("<I", index)


def memo_bomb() -> bytes:
    """9 bytes: PROTO 2, None, LONG_BINPUT 2**28, STOP."""
    return PROTO2 + NONE + long_binput(BOMB_INDEX) + STOP


def nested_marks(depth: int) -> bytes:
    """`depth` lists nested with MARK ... LIST: `depth` MARKs open at once."""
    return MARK * depth + LIST * depth + STOP


def nested_appends(depth: int) -> bytes:
    """`depth` lists nested with EMPTY_LIST ... APPEND: no MARK at all."""
    return EMPTY_LIST * depth + APPEND * (depth - 1) + STOP


def repeated_segment(copies: int, blocks: int) -> bytes:
    """A snapshot whose segment list holds one segment of `blocks` blocks `copies` times by
    reference (a memo get per copy): `copies * blocks` block records from a file of about
    `20 * blocks + 2 * copies` bytes."""
    segment = {"device": 0, "address": 0, "total_size": blocks * 512, "segment_type": "large",
               "blocks": [{"size": 512, "state": "active_allocated"} for _ in range(blocks)]}
    return pickle.dumps({"segments": [segment] * copies, "device_traces": []}, protocol=4)


def repeated_list(copies: int) -> bytes:
    """A list of one list `copies` times: MARK, then a memo get per copy, then APPENDS."""
    inner = list(range(100))
    return pickle.dumps([inner] * copies, protocol=4)


def malformed_snapshots() -> dict[str, Any]:
    """Plain-data snapshots with wrong types or values where torch writes numbers and lists:
    each `(data, records skipped)`, or `(data, None)` when the whole file is not a snapshot."""
    def with_entry(**change: Any) -> dict[str, Any]:
        data = hand_snapshot()
        data["device_traces"][0][1].update(change)
        return data

    def with_segment(**change: Any) -> dict[str, Any]:
        data = hand_snapshot()
        data["segments"][1].update(change)
        return data

    def with_block(**change: Any) -> dict[str, Any]:
        data = hand_snapshot()
        data["segments"][1]["blocks"][0].update(change)
        return data

    return {
        "segments-not-a-list": ({"segments": {"a": 1}, "device_traces": []}, None),
        "traces-not-a-list": ({"segments": [], "device_traces": "x"}, None),
        "top-level-list": ([1, 2], None),
        "size-negative": (with_entry(size=-1), 1),
        "size-a-string": (with_entry(size="1024"), 1),
        "size-2**48": (with_entry(size=1 << 48), 1),
        "size-2**64": (with_entry(size=1 << 64), 1),
        "size-a-float": (with_entry(size=1024.0), 1),
        "addr-negative": (with_entry(addr=-5), 1),
        "action-a-list": (with_entry(action=["alloc"]), 1),
        "time-10**400": (with_entry(time_us=10 ** 400), 0),
        "frames-a-dict": (with_entry(frames={"name": "x"}), 0),
        "frames-missing": (with_entry(frames=None), 0),
        "frame-fields-wrong": (with_entry(frames=[{"filename": [1], "line": "x", "name": 5}]),
                               0),
        "total-size-int64-max": (with_segment(total_size=(1 << 63) - 1), 1),
        "device-2**16": (with_segment(device=1 << 16), 1),
        "blocks-not-a-list": (with_segment(blocks=7), 1),
        "block-size-negative": (with_block(size=-(1 << 40)), 1),
        "block-state-a-dict": (with_block(state={}), 0),
    }
