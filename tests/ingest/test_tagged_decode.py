"""Decoding by category (decode.BatchDecoder) gives exactly the table of decoding every event as
the whole `Event`: each category's slim `Args` holds every field the column builder reads for
that kind of event, and a batch the tagged union cannot decode falls back to the whole one."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from tb_plugin.ingest.decode import (
    OP_FIELDS,
    PHASES,
    TAGGED_CATEGORIES,
    Args,
    BatchDecoder,
    args_fields,
    try_decode_batch,
)
from tb_plugin.ingest.parse import TraceParse
from tb_plugin.ingest.scanner import EventStreamScanner
from tb_plugin.ingest.schema import CATEGORY_KINDS, Kind
from tests.ingest.tables import assert_same_table, document, make_events

#: Every argument key `Args` reads, each with a value of its own (a number, a string or JSON).
_ALL_ARGS = {f.encode_name: (f"v{i}" if f.default is None else [i, i + 1]
                             if isinstance(f.default, msgspec.Raw) else 100 + i)
             for i, f in enumerate(msgspec.structs.fields(Args))}


def _every_category() -> list[dict[str, Any]]:
    """Each tagged category as a complete event, an instant, a `[memory]` instant, a flow and
    an `M` event, every one carrying every argument key."""
    events = []
    for n, cat in enumerate(TAGGED_CATEGORIES):
        ts = 1000.0 + 10 * n
        common = {"cat": cat, "pid": 1, "tid": n % 3, "args": dict(_ALL_ARGS)}
        events += [
            {"ph": "X", "name": f"{cat} op", "ts": ts, "dur": 2, **common},
            {"ph": "i", "name": f"{cat} mark", "ts": ts + 1, "s": "t", **common},
            {"ph": "i", "name": "[memory]", "ts": ts + 2, "s": "t", **common},
            {"ph": "s", "name": "flow", "ts": ts + 3, "id": n, **common},
            {"ph": "M", "name": "thread_name", "ts": ts + 4, **common},
        ]
    return events


def _parse(data: bytes, decoder: Any) -> tuple[Any, Any]:
    parse = TraceParse(scanner=EventStreamScanner(decoder))
    chunk = 64 << 10
    parse.consume((data[i:i + chunk] for i in range(0, len(data), chunk)), None)
    return parse.table(), decoder


def test_every_category_reads_what_the_whole_event_reads() -> None:
    data = document(_every_category())
    tagged, decoder = _parse(data, BatchDecoder())
    whole, _ = _parse(data, try_decode_batch)
    assert decoder.tries > 0 and decoder.misses == 0  # every batch went through the union
    assert_same_table(whole, tagged)
    cats = len(TAGGED_CATEGORIES)
    assert (len(tagged.events), len(tagged.memory), len(tagged.flows)) == (2 * cats, cats, cats)
    assert len(tagged.metadata.process_metadata) == cats

    def rows_of(*kinds: Kind) -> int:  # a complete event and an instant of each such category
        return 2 * sum(CATEGORY_KINDS.get(cat.lower()) in kinds for cat in TAGGED_CATEGORIES)
    assert len(tagged.op_args) == rows_of(Kind.CPU_OP, Kind.USER_ANNOTATION) == 12
    assert len(tagged.python_args) == rows_of(Kind.PYTHON_FUNCTION) == 4
    assert len(tagged.device_args) == rows_of(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) == 20
    assert tagged.op_args["collective"].astype(object).tolist() == [_ALL_ARGS[
        "Collective name"]] * 12
    assert tagged.device_args["grid"].astype(object).tolist() == [str(_ALL_ARGS["grid"])] * 20


def test_a_trace_of_every_shape_reads_the_same() -> None:
    """Generated events (missing categories, odd ids, metadata in the middle): the batches the
    union cannot decode fall back, the table is the same."""
    data = document(make_events(20_000, seed=3), metadata_after=True)
    tagged, decoder = _parse(data, BatchDecoder())
    whole, _ = _parse(data, try_decode_batch)
    assert decoder.misses > 0
    assert_same_table(whole, tagged)


def test_each_kind_keeps_the_fields_its_side_table_reads() -> None:
    op = set(args_fields(Kind.CPU_OP))
    assert op == set(args_fields(Kind.USER_ANNOTATION))
    assert set(OP_FIELDS) <= op and "python_id" not in op and "grid" not in op
    python = set(args_fields(Kind.PYTHON_FUNCTION))
    assert {"python_id", "python_parent_id", "python_module_id"} <= python
    assert not python & set(OP_FIELDS) and "grid" not in python
    for kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET):
        assert {"grid", "block", "stream", "device", "bandwidth"} <= set(args_fields(kind))
    every = {"external_id", "correlation", "external_id_lc", "label", "labels", "sort_index",
             "addr", "mem_bytes", "total_allocated"}
    for cat in TAGGED_CATEGORIES:
        assert every <= set(args_fields(CATEGORY_KINDS.get(cat.lower(), Kind.OTHER))), cat
    other = args_fields(Kind.OTHER)
    assert set(other) == every | {"total_reserved", "mem_device_id", "mem_device_type"}


def _batch(cat: str) -> bytes:
    return json.dumps([{"ph": "X", "cat": cat, "name": "a", "pid": 1, "tid": 1, "ts": 1,
                        "dur": 1}]).encode()


@pytest.mark.parametrize(("misses", "gives_up"), [(2, False), (3, True)])
def test_the_union_is_given_up_past_a_quarter_of_8_batches(misses: int, gives_up: bool
                                                           ) -> None:
    """Failing on 2 of the first 8 batches (a quarter) keeps trying the union; on 3 it stops:
    the 9th batch is decoded whole at once."""
    decoder = BatchDecoder()
    for i in range(8):
        assert decoder(_batch("custom" if i < misses else "cpu_op"))[0].name == "a"
    assert (decoder.tries, decoder.misses) == (8, misses)
    assert decoder(_batch("cpu_op"))[0].cat == "cpu_op"
    assert decoder.tries == (8 if gives_up else 9)


def test_the_union_is_tried_on_each_of_the_first_8_batches() -> None:
    decoder = BatchDecoder()
    for _ in range(7):
        decoder(_batch("custom"))
    assert (decoder.tries, decoder.misses) == (7, 7)
    decoder(_batch("cpu_op"))
    assert (decoder.tries, decoder.misses) == (8, 7)
    decoder(_batch("cpu_op"))
    assert decoder.tries == 8


def test_malformed_batches_are_none_both_ways() -> None:
    decoder = BatchDecoder()
    assert decoder(b'[{"ph": "X", "cat": "cpu_op", "ts": }]') is None
    assert decoder(b'[{"ph": "X", "cat": "cpu_op", "args": [1]}]') is None
    assert try_decode_batch(b'[{"ph": "X", "cat": "cpu_op", "args": [1]}]') is None


def test_every_phase_and_an_unknown_one_read_the_same() -> None:
    """`ph` is one of PHASES in the union; any other phase decodes the batch whole."""
    events = [{"ph": ph, "cat": "cpu_op", "name": f"e{n}", "pid": 1, "tid": 1, "ts": n,
               "dur": 1, "id": n, "args": {"External id": n, "name": "t"}}
              for n, ph in enumerate(PHASES)]
    data = document(events)
    tagged, decoder = _parse(data, BatchDecoder())
    whole, _ = _parse(data, try_decode_batch)
    assert decoder.tries > 0 and decoder.misses == 0
    assert_same_table(whole, tagged)
    data = document([*events, {**events[0], "ph": "Q"}])
    tagged, decoder = _parse(data, BatchDecoder())
    whole, _ = _parse(data, try_decode_batch)
    assert decoder.misses == 1  # the batch with "Q"
    assert_same_table(whole, tagged)
    assert tagged.events["ph"].tolist()[-1] == "Q"
