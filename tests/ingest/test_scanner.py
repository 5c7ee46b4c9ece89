"""The structural scanner must cut only between complete events, whatever the chunking."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.ingest.scanner import (
    EventStreamScanner,
    TraceFormatError,
    scan_structure,
    split_batch_elements,
)

TRICKY_EVENTS = [
    {"ph": "X", "name": 'quote " and brace } in a name', "ts": 1, "dur": 2},
    {"ph": "X", "name": "backslash at end \\", "ts": 2, "dur": 1, "args": {"k": "[{"}},
    {"ph": "X", "name": "escaped \\\" quote and ]]", "ts": 3, "dur": 1},
    {"ph": "i", "name": "[memory]", "ts": 4, "args": {"Bytes": 16, "nested": [[1, [2]], {}]}},
]


def _strict(batch: bytes) -> list | None:
    try:
        return msgspec.json.decode(batch, type=list[dict])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _scan(data: bytes, chunk: int, fast: bool = True) -> tuple[list[dict], EventStreamScanner]:
    """Scan in chunks; `fast` validates candidate cuts by decoding, else only exact cuts."""
    scanner = EventStreamScanner(try_decode=_strict) if fast else EventStreamScanner()
    events: list[dict] = []
    batches = []
    for start in range(0, len(data), chunk):
        batches.extend(scanner.feed(data[start : start + chunk]))
    batches.extend(scanner.close())
    for batch, decoded in batches:
        assert decoded is None or decoded == msgspec.json.decode(batch)
        events.extend(msgspec.json.decode(batch))
    return events, scanner


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_any_chunking_yields_every_event_intact(chunk: int, fast: bool) -> None:
    document = {"schemaVersion": 1, "traceEvents": TRICKY_EVENTS,
                "after": {"x": [{"a": 1}, {"b": "}, {"}]}}
    events, scanner = _scan(json.dumps(document).encode(), chunk, fast)
    assert events == TRICKY_EVENTS
    assert scanner.result.events_closed
    assert json.loads(scanner.result.header + b"]" + scanner.result.trailer) == {
        "schemaVersion": 1, "traceEvents": [], "after": {"x": [{"a": 1}, {"b": "}, {"}]}}


def test_legacy_bare_array() -> None:
    data = json.dumps([{"ph": "X", "pid": "CPU Functions", "ts": 1, "dur": 1}]).encode()
    events, scanner = _scan(data, 5)
    assert len(events) == 1 and scanner.result.bare_array and scanner.result.events_closed


def test_truncated_stream_keeps_complete_events() -> None:
    data = json.dumps({"traceEvents": TRICKY_EVENTS}).encode()
    cut = data.index(b"escaped") + 3  # inside the third event
    events, scanner = _scan(data[:cut], 16)
    assert events == TRICKY_EVENTS[:2]
    assert not scanner.result.events_closed
    assert scanner.result.leftover.startswith(b"{")


def test_events_key_inside_a_string_is_not_the_array() -> None:
    data = b'{"note": "\\"traceEvents\\": [", "traceEvents": [{"ph": "X", "ts": 1}]}'
    events, _ = _scan(data, 4)
    assert events == [{"ph": "X", "ts": 1}]


def test_not_json_is_a_format_error() -> None:
    with pytest.raises(TraceFormatError):
        list(EventStreamScanner().feed(b"hello world"))


def test_false_boundaries_inside_values_are_never_cut() -> None:
    nested = [{"ph": "X", "name": "a}, {b", "ts": i, "args": {"l": [{"x": 1}, {"y": 2}]}}
              for i in range(50)]
    data = json.dumps({"traceEvents": nested}).encode()
    for chunk in (5, 33, 100):
        events, _ = _scan(data, chunk)
        assert events == nested


def test_structure_depths() -> None:
    structure = scan_structure(b'{"a": [1, {"b": "}"}]}', 0)
    assert structure.depth_after.tolist() == [1, 2, 3, 2, 1, 0]


def test_split_batch_elements_recovers_pieces() -> None:
    pieces = split_batch_elements(b'[{"a": 1}, {"b": [2]}, [3], {"c": "}"}]')
    assert pieces == [b'{"a": 1}', b'{"b": [2]}', b"[3]", b'{"c": "}"}']


def _brute_force_depths(data: bytes) -> list[int]:
    """Depth after each bracket outside strings, one character at a time, by the documented
    rule: a quote toggles "inside a string" unless an odd run of backslashes precedes it."""
    depths, depth, inside, run = [], 0, False, 0
    for char in data.decode("latin-1"):
        if char == '"' and run % 2 == 0:
            inside = not inside
        elif char in "[{]}" and not inside:
            depth += 1 if char in "[{" else -1
            depths.append(depth)
        run = run + 1 if char == "\\" else 0
    return depths


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"\\", b'"', b"[", b"]", b"{", b"}", b"a"]), max_size=60))
def test_structure_matches_a_character_by_character_scan(pieces: list[bytes]) -> None:
    """Runs of backslashes of any length before a quote (odd: escaped, even: not)."""
    data = b"".join(pieces)
    assert scan_structure(data, 0).depth_after.tolist() == _brute_force_depths(data)
