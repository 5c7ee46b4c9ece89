"""Issue 19 limits on an N-way split parse (issue 20): the token and inflation limits hold for
the whole file whichever process parses which part. Real child processes; the oracle is the
event layout written here (how many events lie before the limit) and the sequential parse."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tb_plugin.ingest import parse_trace
from tb_plugin.ingest.parse import Limits
from tb_plugin.ingest.split_child import SplitPlan, limit_plans
from tb_plugin.storage import CHUNK_SIZE, open_ref
from tests.ingest.tables import assert_same_table

LOGGER = "tb_plugin.ingest.parallel"
MB = 1 << 20


def _event(i: int) -> bytes:
    return json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 1,
                       "ts": i, "dur": 1}).encode()


def _write(path: Path, pieces: list[bytes]) -> tuple[Path, list[int]]:
    """The trace, and the byte offset where each piece ends."""
    head, ends, offset, body = b'{"traceEvents": [', [], 0, []
    offset = len(head)
    for i, piece in enumerate(pieces):
        sep = b", " if i else b""
        offset += len(sep) + len(piece)
        ends.append(offset)
        body += [sep, piece]
    path.write_bytes(head + b"".join(body) + b"]}")
    return path, ends


@pytest.mark.parametrize("processes", [2, 3, 4])
def test_token_limit_stops_a_split_parse_where_the_sequential_one_stops(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, processes: int) -> None:
    small = [_event(i) for i in range(120_000)]  # ~10 MB
    huge = b'{"ph": "X", "name": "huge", "ts": 1, "dur": 1, "args": {"s": "' + b"x" * (3 * MB) \
        + b'"}}'
    before = 90_000  # in the last part of every split below
    path, _ = _write(tmp_path / "w.pt.trace.json", [*small[:before], huge, *small[before:]])
    limits = Limits(max_bytes=1 << 62, max_token=1 * MB, deadline_s=600.0)
    sequential = parse_trace(open_ref(str(path)), processes=1, limits=limits)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        split = parse_trace(open_ref(str(path)), processes=processes, min_split_bytes=1,
                            limits=limits)
    assert f"in {processes} processes" in caplog.text  # it was split
    assert_same_table(sequential, split)
    assert (split.status.state, split.event_count) == ("truncated", before)
    assert "TORCH_PROF_MAX_TOKEN_MB=1" in " ".join(split.status.messages)
    assert not split.status.cut_off  # a limit, not a file being written: reported at once


def test_inflation_limit_holds_for_every_part(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    path, ends = _write(tmp_path / "w.pt.trace.json", [_event(i) for i in range(150_000)])
    size = path.stat().st_size  # ~12 MB: mids at 1/3 and 2/3 for 3 processes
    max_bytes = size // 2  # the second child starts beyond it: never started
    limits = Limits(max_bytes=max_bytes, max_token=MB, deadline_s=600.0, ratio=7)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        table = parse_trace(open_ref(str(path)), processes=3, min_split_bytes=1, limits=limits)
    assert "in 2 processes" in caplog.text  # one child only: the other's part is over the limit
    assert "merged the child's" not in caplog.text  # its part crosses the limit: not used
    assert table.status.state == "truncated"
    assert "TORCH_PROF_MAX_INFLATE_RATIO=7" in " ".join(table.status.messages)
    # the parse stops before the chunk that would cross the limit: what ended within the
    # bytes read is kept, at most one chunk less than the limit
    within = sum(1 for end in ends if end <= max_bytes)
    within_a_chunk_less = sum(1 for end in ends if end <= max_bytes - CHUNK_SIZE)
    assert within_a_chunk_less <= table.event_count <= within


def test_limit_plans_drops_parts_beyond_the_inflation_limit() -> None:
    plans = [SplitPlan("f", False, 100, 200), SplitPlan("f", False, 200, 300),
             SplitPlan("f", False, 300, None)]
    limits = Limits(max_bytes=250, max_token=10, deadline_s=1.0)
    kept = limit_plans(plans, limits)
    assert [(p.mid, p.next_mid, p.limits) for p in kept] == [(100, 200, limits),
                                                             (200, None, limits)]
    assert limit_plans(plans, Limits(max_bytes=100, max_token=10, deadline_s=1.0)) == []
