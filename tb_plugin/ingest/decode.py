"""Decode event batches with msgspec into small typed Structs.

msgspec decodes each batch straight into `Event`/`Args` Structs and skips every argument we do
not name, so no dict is built per event (columns.py then turns a batch into numpy columns and
drops the Structs). Malformed events cost only themselves: a batch that fails to decode is
retried event by event, repairing what the reference tolerated.

`BatchDecoder` first decodes a batch by category (a msgspec union tagged by `cat`): each known
category gets an `Event` whose `Args` has only the fields the column builder reads for that
kind of event, so a `python_function` event (4 in 10 of a recorded trace) fills 15 argument
slots, not 46. A batch with an event of another category, or none, is decoded as `Event`s:
the columns are the same either way, only the cost differs.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union

import msgspec

from .scanner import split_batch_elements
from .schema import CATEGORY_KINDS, DEVICE_KINDS, Kind

NO_RAW = msgspec.Raw()  # absent; an empty Raw is never produced by the decoder


NAN = float("nan")


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

    external_id: Any = msgspec.field(default=NAN, name="External id")
    sequence_number: Any = msgspec.field(default=NAN, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=NAN, name="Fwd thread id")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_dims_lc: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input dims")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    device: Any = NAN
    stream: Any = NAN
    correlation: Any = NAN
    external_id_lc: Any = msgspec.field(default=NAN, name="external id")
    registers_per_thread: Any = msgspec.field(default=NAN, name="registers per thread")
    shared_memory: Any = msgspec.field(default=NAN, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=NAN, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=NAN, name="warps per SM")
    grid: msgspec.Raw = NO_RAW
    block: msgspec.Raw = NO_RAW
    occupancy: Any = msgspec.field(default=NAN, name="est. achieved occupancy %")
    bytes: Any = NAN
    bandwidth: Any = msgspec.field(default=NAN, name="memory bandwidth (GB/s)")
    python_parent_id: Any = msgspec.field(default=NAN, name="Python parent id")
    python_id: Any = msgspec.field(default=NAN, name="Python id")
    python_module_id: Any = msgspec.field(default=NAN, name="Python module id")
    total_reserved: Any = msgspec.field(default=NAN, name="Total Reserved")
    total_allocated: Any = msgspec.field(default=NAN, name="Total Allocated")
    mem_bytes: Any = msgspec.field(default=NAN, name="Bytes")
    mem_device_id: Any = msgspec.field(default=NAN, name="Device Id")
    mem_device_type: Any = msgspec.field(default=NAN, name="Device Type")
    addr: Any = msgspec.field(default=NAN, name="Addr")
    collective: Any = msgspec.field(default=None, name="Collective name")
    dtype: Any = None
    in_msg_nelems: Any = msgspec.field(default=NAN, name="In msg nelems")
    group_size: Any = msgspec.field(default=NAN, name="Group size")
    out_msg_nelems: Any = msgspec.field(default=NAN, name="Out msg nelems")
    process_group: Any = msgspec.field(default=None, name="Process Group Name")
    seq: Any = msgspec.field(default=NAN, name="Seq")  # per-process-group collective number
    flops: Any = NAN  # recorded with `with_flops=True`
    kernel_backend: Any = None
    kernel_file: Any = None  # Inductor-generated kernels (Triton, C++): the source file
    kernel_hash: Any = None
    kernel_flop: Any = NAN  # Inductor's own estimate, when it wrote one
    kernel_num_gb: Any = NAN
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
    ts: Any = NAN
    dur: Any = NAN
    id: Any = NAN
    bp: Any = None
    args: Optional[Args] = EMPTY_ARGS  # None only for an explicit `"args": null`


#: The `Args` fields columns.py reads, by what for: every table row, `M` events and `[memory]`
#: instants (whatever their category), then the kinds with a side table. Every field is in one.
ROW_FIELDS = ("external_id", "correlation", "external_id_lc")
META_FIELDS = ("label", "labels", "sort_index")
MEMORY_FIELDS = ("total_reserved", "total_allocated", "mem_bytes", "mem_device_id",
                 "mem_device_type", "addr")
PYTHON_FIELDS = ("python_parent_id", "python_id", "python_module_id")
DEVICE_FIELDS = ("device", "stream", "registers_per_thread", "shared_memory", "blocks_per_sm",
                 "warps_per_sm", "grid", "block", "occupancy", "bytes", "bandwidth")
OP_FIELDS = tuple(name for name in Args.__struct_fields__ if name not in {
    *ROW_FIELDS, *META_FIELDS, *MEMORY_FIELDS, *PYTHON_FIELDS, *DEVICE_FIELDS})
#: The Chrome trace event phases: the tagged union decodes `ph` as one of these shared strings
#: (their hash computed once, which makes interning them cheaper); another phase falls back.
PHASES = ("X", "B", "E", "i", "I", "s", "t", "f", "M", "C", "b", "n", "e", "P", "N", "O", "D",
          "R", "c", "(", ")")
#: Categories decoded by the tagged union, as Kineto and PyTorch 1.x write them.
TAGGED_CATEGORIES = (*CATEGORY_KINDS, *(c.capitalize() for c in CATEGORY_KINDS),
                     "cpu_instant_event", "fwdbwd", "ac2g", "async_cpu_to_gpu")


def args_fields(kind: int) -> tuple[str, ...]:
    """The `Args` fields the column builder reads of an event of `kind`, in `Args`'s order."""
    wanted = {*ROW_FIELDS, *META_FIELDS, *MEMORY_FIELDS}
    if kind == Kind.PYTHON_FUNCTION:
        wanted.update(PYTHON_FIELDS)
    if kind in DEVICE_KINDS:
        wanted.update(DEVICE_FIELDS)
    if kind in (Kind.CPU_OP, Kind.USER_ANNOTATION):
        wanted.update(OP_FIELDS)
    return tuple(name for name in Args.__struct_fields__ if name in wanted)


def _slim_args(fields: tuple[str, ...]) -> type:
    by_name = {f.name: f for f in msgspec.structs.fields(Args)}
    return msgspec.defstruct(
        "Args_" + str(len(fields)),
        [(name, by_name[name].type, msgspec.field(default=by_name[name].default,
                                                  name=by_name[name].encode_name))
         for name in fields], gc=False, frozen=True, module=__name__)


def _tagged_events() -> tuple[type, ...]:
    """One `Event` per category in TAGGED_CATEGORIES: `cat` is the tag (a class attribute),
    `args` the slim `Args` of the category's kind (the builder's own rule: `cat.lower()`)."""
    slim: dict[tuple[str, ...], type] = {}
    event_fields = [(f.name, Optional[Literal[PHASES]] if f.name == "ph" else f.type,
                     msgspec.field(default=f.default, name=f.encode_name))
                    for f in msgspec.structs.fields(Event) if f.name not in ("cat", "args")]
    variants = []
    for cat in dict.fromkeys(TAGGED_CATEGORIES):
        fields = args_fields(CATEGORY_KINDS.get(cat.lower(), Kind.OTHER))
        if fields not in slim:
            slim[fields] = _slim_args(fields)
        variants.append(msgspec.defstruct(
            "Event_" + cat, [*event_fields, ("args", Optional[slim[fields]], slim[fields]())],
            gc=False, tag=cat, tag_field="cat", namespace={"cat": cat}, module=__name__))
    return tuple(variants)


TAGGED_EVENTS = _tagged_events()
_BATCH_DECODER = msgspec.json.Decoder(list[Event])
_TAGGED_DECODER = msgspec.json.Decoder(list[Union[TAGGED_EVENTS]])  # type: ignore[valid-type]
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


class BatchDecoder:
    """`try_decode_batch` for one parse, by category first (see the module docstring).

    The tagged decode is given up for the rest of the parse once it has failed on more than a
    quarter of at least 8 batches (a trace of other categories): it then costs nothing more.
    """

    def __init__(self) -> None:
        self.tries = 0
        self.misses = 0

    def __call__(self, batch: bytes) -> Optional[list[Any]]:
        if self.tries < 8 or self.misses * 4 <= self.tries:
            self.tries += 1
            try:
                return _TAGGED_DECODER.decode(batch)
            except _UNDECODABLE:  # another category, or malformed: the whole decode says which
                self.misses += 1
        return try_decode_batch(batch)


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
