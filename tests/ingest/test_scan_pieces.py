"""TraceParse feeds its scanner at most SCAN_PIECE bytes at a time (one batch each), whatever
the size of the chunks it is given, and the table does not depend on where it cut."""

from __future__ import annotations

import math

import pytest

from tb_plugin.ingest.parse import SCAN_PIECE, TraceParse
from tests.ingest.tables import assert_same_table, document, make_events

DATA = document(make_events(30_000, seed=5))


def _parse_in(chunk: int) -> TraceParse:
    parse = TraceParse()
    for start in range(0, len(DATA), chunk):
        parse.feed(DATA[start:start + chunk])
    return parse


@pytest.mark.parametrize(("chunk", "pieces_per_chunk"), [
    (SCAN_PIECE, 1),  # exactly one piece
    (SCAN_PIECE * 3 // 2, 2),  # one piece and a half: two
    (len(DATA), math.ceil(len(DATA) / SCAN_PIECE)),  # the whole file in one chunk
])
def test_a_chunk_is_scanned_in_pieces_of_scan_piece_bytes(chunk: int, pieces_per_chunk: int
                                                          ) -> None:
    """Every piece ends after a complete event in these traces, so each gives one batch."""
    assert len(DATA) > 3 * SCAN_PIECE
    parse = _parse_in(chunk)
    chunks = math.ceil(len(DATA) / chunk)
    last_is_one_piece = len(DATA) - (chunks - 1) * chunk <= SCAN_PIECE
    expected = chunks * pieces_per_chunk - (pieces_per_chunk == 2 and last_is_one_piece)
    assert parse.scanner.result.batch_count == expected
    parse.close()
    small = _parse_in(64 << 10)
    small.close()
    assert small.scanner.result.batch_count > expected
    assert_same_table(small.table(), parse.table())
