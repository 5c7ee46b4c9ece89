"""The pure plain-data pickle reader: the same objects as CPython's unpickler for every protocol
and for real snapshots, and each limit pinned on both sides of its boundary; hostile pickles
(memo bomb, truncation, lengths past the end, unhashable keys, random bytes) end as a
`PickleError`, never as another exception."""

from __future__ import annotations

import pickle
import pickletools
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.ingest.plain_pickle import (
    PickleError,
    PickleLimits,
    PickleRefused,
    read_plain,
)
from tb_plugin.ingest.snapshot import read_snapshot, to_columns
from tests.ingest.hostile_pickles import (
    BOMB_INDEX,
    NONE,
    PROTO2,
    STOP,
    long_binget,
    long_binput,
    memo_bomb,
    nested_appends,
    nested_marks,
    repeated_list,
)
from tests.ingest.snapshots import hand_snapshot
from tests.support import SHARED_TRACES, needs_shared

BUILDING = {"LONG1", "LONG4", "BININT1", "BININT", "BININT2", "INT", "LONG", "BINFLOAT", "FLOAT",
            "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BINSTRING",
            "SHORT_BINSTRING", "STRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
            "BYTEARRAY8", "EMPTY_DICT", "DICT", "EMPTY_LIST", "LIST", "EMPTY_TUPLE", "TUPLE",
            "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_SET", "FROZENSET"}


def plain_value(protocol: int) -> dict[str, Any]:
    shared = [1, 2, 3]
    value: dict[str, Any] = {
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -(1 << 31), (1 << 31) - 1, 1 << 70,
                 -(1 << 70), 1 << 3000],
        "floats": [0.0, -2.5, 1e308, float("inf")],
        "text": ["", "a", "é€\U0001f600", "x" * 300, "line\nbreak \\ back"],
        "singletons": [None, True, False],
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ("pool", 0)],
        "nested": {"a": {"b": {"c": [[], {}]}}, (1, "k"): "tuple key", 7: "int key"},
        "shared": [shared, shared],
        "empty": {},
    }
    if protocol >= 3:
        value["bytes"] = [b"", b"\x00\xff", b"y" * 300]
    if protocol >= 4:
        value["sets"] = [set(), {1, "a"}, frozenset({2, (3, 4)})]
    if protocol >= 5:
        value["bytearray"] = bytearray(b"abc")
    return value


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_protocol_reads_as_pickle_does(protocol: int) -> None:
    value = plain_value(protocol)
    data = pickle.dumps(value, protocol=protocol)
    read, _ = read_plain(data)
    assert read == pickle.loads(data) == value
    assert read["shared"][0] is read["shared"][1]  # shared references stay shared


def test_the_object_count_is_what_the_pickle_builds() -> None:
    data = pickle.dumps(hand_snapshot(), protocol=4)
    expected = sum(op.name in BUILDING for op, _, _ in pickletools.genops(data))
    _, objects = read_plain(data)
    assert objects == expected
    with pytest.raises(PickleError, match=f"over {expected - 1} objects"):
        read_plain(data, PickleLimits(max_objects=expected - 1))
    assert read_plain(data, PickleLimits(max_objects=expected))[1] == expected


def test_the_opcode_limit_counts_every_memo_get() -> None:
    data = repeated_list(1000)
    ops = sum(1 for _ in pickletools.genops(data))
    assert ops > 1000  # a memo get per copy
    read, _ = read_plain(data, PickleLimits(max_ops=ops))
    assert len(read) == 1000 and read[0] is read[999]
    with pytest.raises(PickleError, match=f"over {ops - 1} opcodes"):
        read_plain(data, PickleLimits(max_ops=ops - 1))


@needs_shared
@pytest.mark.parametrize("name", ["medium_1024_inference_memory_snapshot.pickle",
                                  "medium_512_training_memory_snapshot.pickle"])
def test_real_snapshots_read_as_pickle_does(name: str) -> None:
    data = (SHARED_TRACES / "cs336_cuda_snapshots" / name).read_bytes()
    read, objects = read_plain(data)
    assert read == pickle.loads(data)
    assert objects == sum(op.name in BUILDING for op, _, _ in pickletools.genops(data))


def test_the_memo_bomb_is_refused_without_allocating() -> None:
    bomb = memo_bomb()
    assert len(bomb) == 9
    with pytest.raises(PickleError, match=f"memo index {BOMB_INDEX} is beyond the 0 entries"):
        read_plain(bomb)


def test_memo_puts_follow_the_entries_so_far() -> None:
    # index == entries so far: appended; one past: refused; an existing index: replaced
    ok = PROTO2 + NONE + long_binput(0) + b"0\x88" + long_binput(1) + b"0" + long_binget(1) \
        + STOP
    assert read_plain(ok)[0] is True
    skip = PROTO2 + NONE + long_binput(1) + STOP
    with pytest.raises(PickleError, match="memo index 1 is beyond the 0 entries"):
        read_plain(skip)
    again = PROTO2 + NONE + long_binput(0) + b"0\x89" + long_binput(0) + b"0" \
        + long_binget(0) + STOP
    assert read_plain(again)[0] is False


def test_memo_gets_must_name_a_stored_entry() -> None:
    assert read_plain(PROTO2 + NONE + long_binput(0) + b"0" + long_binget(0) + STOP)[0] is None
    with pytest.raises(PickleError, match="memo index 1 was never stored"):
        read_plain(PROTO2 + NONE + long_binput(0) + b"0" + long_binget(1) + STOP)
    with pytest.raises(PickleError, match="memo index 0 was never stored"):
        read_plain(PROTO2 + b"h\x00" + STOP)  # BINGET on an empty memo


def test_open_marks_are_bounded() -> None:
    value, _ = read_plain(nested_marks(1000))
    depth = 0
    while value:
        value, depth = value[0], depth + 1
    assert depth == 999  # the innermost list is empty
    with pytest.raises(PickleError, match="nested too deeply: over 1000 open MARKs"):
        read_plain(nested_marks(1001))
    assert read_plain(nested_marks(5), PickleLimits(max_marks=5))[0] == [[[[[]]]]]
    with pytest.raises(PickleError, match="over 4 open MARKs"):
        read_plain(nested_marks(5), PickleLimits(max_marks=4))


def test_deep_nesting_without_marks_costs_no_recursion() -> None:
    value, objects = read_plain(nested_appends(200_000))
    assert objects == 200_000
    depth = 0
    while value:
        value, depth = value[0], depth + 1
    assert depth == 199_999


def test_integer_lengths_are_bounded() -> None:
    def long4(n: int) -> bytes:
        return PROTO2 + b"\x8b" + struct.pack("<i", n) + b"\x01" + b"\x00" * (n - 1) + STOP
    assert read_plain(long4(1024))[0] == 1
    with pytest.raises(PickleError, match="an integer of 1025 bytes"):
        read_plain(long4(1025))


@pytest.mark.parametrize("opcode", [b"X", b"B", b"T"])  # BINUNICODE, BINBYTES, BINSTRING
def test_a_length_past_the_end_is_refused_before_anything_is_read(opcode: bytes) -> None:
    data = PROTO2 + opcode + struct.pack("<I", (1 << 31) - 1) + b"abc" + STOP
    with pytest.raises(PickleError, match="runs past the end of the data"):
        read_plain(data)
    exact = PROTO2 + opcode + struct.pack("<I", 3) + b"abc" + STOP
    assert read_plain(exact)[0] in ("abc", b"abc")


def test_every_truncation_is_a_pickle_error() -> None:
    data = pickle.dumps(hand_snapshot(), protocol=4)
    for end in range(len(data)):
        with pytest.raises(PickleError):
            read_plain(data[:end])


@pytest.mark.parametrize(("key", "accepted"), [
    ("s", True), (1, True), (None, True), ((1, "a", None), True),
    (((1,),), False), ((1, [2]), False), ([1], False), ({}, False),
])
def test_dict_keys_must_be_flat(key: Any, accepted: bool) -> None:
    key_pickle = pickle.dumps(key, protocol=4)[2:-1]  # without PROTO and STOP (and FRAME: none
    data = b"\x80\x04}" + key_pickle + b"K\x01s."  # for so small a pickle): {key: 1}
    if accepted:
        assert read_plain(data)[0] == {key: 1}
    else:
        with pytest.raises(PickleError, match="a dict key or set item is a"):
            read_plain(data)


@pytest.mark.parametrize(("data", "message"), [
    (PROTO2 + NONE + b")R" + STOP, "REDUCE"),
    (PROTO2 + b"\x82\x01" + STOP, "EXT1"),
    (b"\x80\x05\x97" + STOP, "NEXT_BUFFER"),
    (PROTO2 + b"}N" + b"b" + STOP, "BUILD"),
    (PROTO2 + b"(ios\nsystem\n" + STOP, "os.system"),
    (b"\x80\x04\x8c\x02os\x8c\x06system\x93" + STOP, "os.system"),
])
def test_code_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(PickleRefused, match=f"^refused: .*{message}.*nothing from the file "):
        read_plain(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_end_in_a_pickle_error_or_what_pickle_builds(data: bytes) -> None:
    kind, value = outcome(data)
    assert kind == "error" or value == repr(pickle.loads(data))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_snapshots_end_in_a_pickle_error_or_what_pickle_builds(data: st.DataObject
                                                                       ) -> None:
    protocol = data.draw(st.sampled_from([0, 2, 4]))
    pickled = bytearray(pickle.dumps(hand_snapshot(), protocol=protocol))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(pickled) - 1))
        pickled[at] = data.draw(st.integers(0, 255))
    kind, value = outcome(bytes(pickled))
    assert kind == "error" or value == repr(pickle.loads(bytes(pickled)))


def outcome(data: bytes) -> tuple[str, str]:
    """("error", "") when the reader refuses `data` (nothing else may escape it), else
    ("value", repr of what it read: repr, so that a NaN equals itself)."""
    try:
        return "value", repr(read_plain(data)[0])
    except PickleError:
        return "error", ""


@needs_shared
def test_real_snapshot_columns_are_those_of_pickles_objects() -> None:
    path = SHARED_TRACES / "cs336_cuda_snapshots" / "medium_512_training_memory_snapshot.pickle"
    snap = read_snapshot(path)
    plain = pickle.loads(path.read_bytes())
    expected = to_columns(plain)
    assert snap.skipped == expected.skipped == 0 and snap.stacks == expected.stacks
    assert len(snap.entries["action"]) == sum(len(t) for t in plain["device_traces"])
    assert len(snap.blocks["size"]) == sum(len(s["blocks"]) for s in plain["segments"])
    for part in ("entries", "segments", "blocks"):
        for name, column in getattr(expected, part).items():
            np.testing.assert_array_equal(getattr(snap, part)[name], column)
