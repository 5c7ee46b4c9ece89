"""Decode event batches with msgspec into small typed Structs.

msgspec decodes each batch straight into `Event`/`Args` Structs and skips every argument we do
not name, so no dict is built per event (columns.py then turns a batch into numpy columns and
drops the Structs). Malformed events cost only themselves: a batch that fails to decode is
retried event by event, repairing what the reference tolerated.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import msgspec

from .scanner import split_batch_elements

NO_RAW = msgspec.Raw()  # absent; an empty Raw is never produced by the decoder


_NAN = float("nan")


class Args(msgspec.Struct, gc=False, frozen=True):
    """The event arguments any view reads. Unknown keys are skipped by the decoder.

    Numeric fields default to NaN, not None, so that a batch's column of them converts to
    float64 in one numpy call (None forces the slow per-value path).

    The fields are in the order Kineto writes the keys (cpu_op, kernel/memcpy, python_function,
    `[memory]`): msgspec looks a key up from the field after the last one matched, so keys in
    field order cost one comparison each (this order cut the decode by a quarter on a recorded
    trace, bench/parse_results.md). A new argument goes after the ones its events carry before
    it, or at the end; its column is filled in columns.py.
    """

    external_id: Any = msgspec.field(default=_NAN, name="External id")
    sequence_number: Any = msgspec.field(default=_NAN, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=_NAN, name="Fwd thread id")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_dims_lc: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input dims")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    device: Any = _NAN
    stream: Any = _NAN
    correlation: Any = _NAN
    external_id_lc: Any = msgspec.field(default=_NAN, name="external id")
    registers_per_thread: Any = msgspec.field(default=_NAN, name="registers per thread")
    shared_memory: Any = msgspec.field(default=_NAN, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=_NAN, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=_NAN, name="warps per SM")
    grid: msgspec.Raw = NO_RAW
    block: msgspec.Raw = NO_RAW
    occupancy: Any = msgspec.field(default=_NAN, name="est. achieved occupancy %")
    bytes: Any = _NAN
    bandwidth: Any = msgspec.field(default=_NAN, name="memory bandwidth (GB/s)")
    python_parent_id: Any = msgspec.field(default=_NAN, name="Python parent id")
    python_id: Any = msgspec.field(default=_NAN, name="Python id")
    python_module_id: Any = msgspec.field(default=_NAN, name="Python module id")
    total_reserved: Any = msgspec.field(default=_NAN, name="Total Reserved")
    total_allocated: Any = msgspec.field(default=_NAN, name="Total Allocated")
    mem_bytes: Any = msgspec.field(default=_NAN, name="Bytes")
    mem_device_id: Any = msgspec.field(default=_NAN, name="Device Id")
    mem_device_type: Any = msgspec.field(default=_NAN, name="Device Type")
    addr: Any = msgspec.field(default=_NAN, name="Addr")
    collective: Any = msgspec.field(default=None, name="Collective name")
    dtype: Any = None
    in_msg_nelems: Any = msgspec.field(default=_NAN, name="In msg nelems")
    group_size: Any = msgspec.field(default=_NAN, name="Group size")
    out_msg_nelems: Any = msgspec.field(default=_NAN, name="Out msg nelems")
    process_group: Any = msgspec.field(default=None, name="Process Group Name")
    seq: Any = msgspec.field(default=_NAN, name="Seq")  # per-process-group collective number
    flops: Any = _NAN  # recorded with `with_flops=True`
    kernel_backend: Any = None
    kernel_file: Any = None  # Inductor-generated kernels (Triton, C++): the source file
    kernel_hash: Any = None
    kernel_flop: Any = _NAN  # Inductor's own estimate, when it wrote one
    kernel_num_gb: Any = _NAN
    # `M` metadata events
    label: Any = msgspec.field(default=None, name="name")
    labels: Any = None
    sort_index: Any = None


EMPTY_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = _NAN
    dur: Any = _NAN
    id: Any = _NAN
    bp: Any = None
    args: Optional[Args] = EMPTY_ARGS  # None only for an explicit `"args": null`


_BATCH_DECODER = msgspec.json.Decoder(list[Event])
_EVENT_DECODER = msgspec.json.Decoder(Event)
_BARE_NA = re.compile(rb'(?<=[:\[,\s])N/A(?=[,\]\}\s])')
_CONTROL_CHARS = re.compile(rb"[\x00-\x1f]")
#: What msgspec raises on bad input besides its own errors: invalid UTF-8 inside a string, and
#: nesting deeper than the interpreter's recursion limit.
_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)


def try_decode_batch(batch: bytes) -> Optional[list[Event]]:
    """The whole batch, or None if any part of it is malformed."""
    try:
        return _BATCH_DECODER.decode(batch)
    except _UNDECODABLE:
        return None


def recover_batch(batch: bytes) -> tuple[list[Event], int, list[str]]:
    """Decode a malformed batch event by event: (events kept, number skipped, problems)."""
    events: list[Event] = []
    problems: list[str] = []
    for piece in split_batch_elements(batch):
        event, problem = _decode_one(piece)
        if event is not None:
            events.append(event)
        if problem:
            problems.append(problem)
    skipped = sum(1 for p in problems if p.startswith("skipped"))
    return events, skipped, problems


def _decode_one(piece: bytes) -> tuple[Optional[Event], Optional[str]]:
    """Decode one event, repairing what the reference tolerated (bare N/A, control chars)."""
    for attempt in (piece, _BARE_NA.sub(b'"N/A"', piece), _CONTROL_CHARS.sub(b" ", piece),
                    _valid_utf8(piece)):
        try:
            return _EVENT_DECODER.decode(attempt), None
        except msgspec.ValidationError:
            return _decode_loose(attempt)
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        except RecursionError:
            return None, f"skipped an event nested too deeply: {piece[:80]!r}"
    snippet = piece[:80].decode("utf-8", "replace")
    return None, f"skipped malformed event (invalid JSON): {snippet!r}"


def _valid_utf8(piece: bytes) -> bytes:
    """Invalid UTF-8 replaced by U+FFFD: the event is kept with a readable name."""
    return piece.decode("utf-8", "replace").encode("utf-8")


def _decode_loose(piece: bytes) -> tuple[Optional[Event], Optional[str]]:
    """Valid JSON of the wrong shape: keep the event, drop only the arguments we cannot read."""
    try:
        value = msgspec.json.decode(piece)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None, f"skipped malformed event (invalid JSON): {piece[:80]!r}"
    if not isinstance(value, dict):
        return None, f"skipped a non-object in traceEvents: {str(value)[:60]!r}"
    args = value.pop("args", None)
    event = msgspec.convert(value, Event, strict=False) if value else Event()
    if isinstance(args, dict):
        try:
            event.args = msgspec.json.decode(msgspec.json.encode(args), type=Args)
        except msgspec.ValidationError:
            event.args = EMPTY_ARGS
    return event, f"event {value.get('name')!r} had unreadable arguments (ignored)"
