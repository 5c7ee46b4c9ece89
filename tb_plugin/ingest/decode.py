"""Decode event batches with msgspec and append them to growing columns.

msgspec decodes each batch straight into small typed Structs and skips every argument we do not
name, so no dict is built per event. Each batch is then turned into numpy columns (strings
interned to integer codes) and the Structs are dropped: memory stays proportional to the columns.
Malformed events cost only themselves: a batch that fails to decode is retried event by event.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from typing import Any, Callable, Optional

import msgspec
import numpy as np
import pandas as pd

from .scanner import split_batch_elements
from .schema import (
    CATEGORY_KINDS,
    DEVICE_ARG_COLUMNS,
    EVENT_COLUMNS,
    FLOW_COLUMNS,
    MEMORY_COLUMNS,
    OP_ARG_COLUMNS,
    PYTHON_ARG_COLUMNS,
    TABLE_COLUMNS,
    Kind,
)

_NO_RAW = msgspec.Raw()  # absent; an empty Raw is never produced by the decoder


class Args(msgspec.Struct, gc=False):
    """The event arguments any view reads. Unknown keys are skipped by the decoder."""

    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_lc: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    registers_per_thread: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Any = None
    bandwidth: Any = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_dims_lc: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input dims")
    input_types: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    sequence_number: Any = msgspec.field(default=None, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=None, name="Fwd thread id")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    process_group: Any = msgspec.field(default=None, name="Process Group Name")
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")
    python_module_id: Any = msgspec.field(default=None, name="Python module id")
    mem_device_type: Any = msgspec.field(default=None, name="Device Type")
    mem_device_id: Any = msgspec.field(default=None, name="Device Id")
    addr: Any = msgspec.field(default=None, name="Addr")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    # `M` metadata events
    label: Any = msgspec.field(default=None, name="name")
    labels: Any = None
    sort_index: Any = None


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    bp: Any = None
    args: Optional[Args] = None


_EMPTY_ARGS = Args()
_BATCH_DECODER = msgspec.json.Decoder(list[Event])
_EVENT_DECODER = msgspec.json.Decoder(Event)
_BARE_NA = re.compile(rb'(?<=[:\[,\s])N/A(?=[,\]\}\s])')
_CONTROL_CHARS = re.compile(rb"[\x00-\x1f]")


def try_decode_batch(batch: bytes) -> Optional[list[Event]]:
    """The whole batch, or None if any part of it is malformed."""
    try:
        return _BATCH_DECODER.decode(batch)
    except (msgspec.DecodeError, msgspec.ValidationError):
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
    for attempt in (piece, _BARE_NA.sub(b'"N/A"', piece), _CONTROL_CHARS.sub(b" ", piece)):
        try:
            return _EVENT_DECODER.decode(attempt), None
        except msgspec.ValidationError:
            return _decode_loose(attempt)
        except msgspec.DecodeError:
            continue
    snippet = piece[:80].decode("utf-8", "replace")
    return None, f"skipped malformed event (invalid JSON): {snippet!r}"


def _decode_loose(piece: bytes) -> tuple[Optional[Event], Optional[str]]:
    """Valid JSON of the wrong shape: keep the event, drop only the arguments we cannot read."""
    try:
        value = msgspec.json.decode(piece)
    except msgspec.DecodeError:
        return None, f"skipped malformed event (invalid JSON): {piece[:80]!r}"
    if not isinstance(value, dict):
        return None, f"skipped a non-object in traceEvents: {str(value)[:60]!r}"
    args = value.pop("args", None)
    event = msgspec.convert(value, Event, strict=False) if value else Event()
    if isinstance(args, dict):
        try:
            event.args = msgspec.json.decode(msgspec.json.encode(args), type=Args)
        except msgspec.ValidationError:
            event.args = None
    return event, f"event {value.get('name')!r} had unreadable arguments (ignored)"


class Interner:
    """Maps values to dense integer codes; `categories[code]` is the string.

    Codes are handed out in order of first appearance, the missing value included (interned
    before the first values when it has a name), so the category order depends only on the
    sequence of values, never on how it was cut into batches: a parse split across two
    processes and merged gets exactly the categories of the sequential parse.
    """

    def __init__(self, normalize: Callable[[Any], str] = str, missing_as: Optional[str] = None):
        self.categories: list[str] = []
        self._codes: dict[str, int] = {}
        self._normalize = normalize
        self._missing_as = missing_as

    def code(self, value: Any) -> int:
        return self.code_of_key(self._normalize(value))

    def code_of_key(self, key: str) -> int:
        """The code of an already normalised string (merging another interner's categories)."""
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.categories)
            self.categories.append(key)
        return code

    def codes(self, values: list[Any]) -> np.ndarray:
        missing = -1 if self._missing_as is None else self.code_of_key(self._missing_as)
        if not values:
            return np.empty(0, dtype=np.int32)
        column = np.empty(len(values), dtype=object)
        column[:] = values
        # None and NaN come back as one NaN unique, at its place in the order of appearance.
        local, uniques = pd.factorize(column, use_na_sentinel=False)
        lut = np.fromiter((missing if _is_missing(u) else self.code(u) for u in uniques),
                          dtype=np.int32, count=len(uniques))
        return lut[local]

    def merge(self, categories: list[str]) -> np.ndarray:
        """Codes in this interner of another one's categories, appending the new ones in their
        order; index the result with the other's codes (-1, "missing", maps to -1)."""
        lut = np.fromiter((self.code_of_key(c) for c in categories), dtype=np.int32,
                          count=len(categories))
        return np.append(lut, np.int32(-1))


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _json_repr(raw: bytes) -> str:
    """Python-style repr of a JSON value, as the reference shows shapes: '[[2, 8, 5], []]'."""
    try:
        return str(msgspec.json.decode(raw))
    except msgspec.DecodeError:
        return raw.decode("utf-8", "replace")


def floats(values: list[Any]) -> np.ndarray:
    """Numbers to float64; None, absent and non-numeric values become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _raw_bytes(values: list[msgspec.Raw]) -> list[Optional[bytes]]:
    return [bytes(v) or None for v in values]


class ColumnBuilder:
    """Accumulates decoded batches as numpy column chunks, one list per table column."""

    def __init__(self) -> None:
        self.interners: dict[str, Interner] = {
            "ph": Interner(missing_as=""),
            "cat": Interner(missing_as=""),
            "name": Interner(missing_as=""),
            "pid": Interner(normalize=_id_string, missing_as=""),
            "tid": Interner(normalize=_id_string, missing_as=""),
            "grid": Interner(normalize=_json_repr),
            "block": Interner(normalize=_json_repr),
            "input_dims": Interner(normalize=_json_repr),
            "input_types": Interner(normalize=_json_repr),
            "call_stack": Interner(),
            "collective": Interner(),
            "dtype": Interner(),
            "process_group": Interner(),
            "binding": Interner(),
        }
        self.chunks: dict[str, dict[str, list[np.ndarray]]] = {
            table: {name: [] for name in columns}
            for table, columns in (
                ("events", EVENT_COLUMNS),
                ("device_args", DEVICE_ARG_COLUMNS),
                ("op_args", OP_ARG_COLUMNS),
                ("python_args", PYTHON_ARG_COLUMNS),
                ("memory", MEMORY_COLUMNS),
                ("flows", FLOW_COLUMNS),
            )
        }
        self.process_metadata: list[dict[str, Any]] = []
        self.event_rows = 0
        self.negative_durations = 0
        self.missing_timestamps = 0
        self._kind_by_cat_code: list[int] = []

    def add(self, events: list[Event]) -> None:
        if not events:
            return
        ph = self.interners["ph"].codes([e.ph for e in events])
        name = self.interners["name"].codes([e.name for e in events])
        ph_values = self.interners["ph"].categories
        name_values = self.interners["name"].categories
        ph_kind = np.array([_phase_group(v) for v in ph_values], dtype=np.int8)[ph]
        is_memory_name = np.zeros(len(name_values), dtype=bool)
        if "[memory]" in self.interners["name"]._codes:
            is_memory_name[self.interners["name"]._codes["[memory]"]] = True
        memory = (ph_kind == _INSTANT) & is_memory_name[name]
        flows = np.flatnonzero(ph_kind == _FLOW)
        memories = np.flatnonzero(memory)
        rows = np.flatnonzero((ph_kind != _META) & (ph_kind != _FLOW) & ~memory)
        self._add_metadata([events[i] for i in np.flatnonzero(ph_kind == _META)])
        ts = floats([events[i].ts for i in rows])
        timed = ~np.isnan(ts)
        if not timed.all():  # an event with no time cannot be placed anywhere
            self.missing_timestamps += int((~timed).sum())
            rows, ts = rows[timed], ts[timed]
        shared = self._shared_codes(events, flows, memories, rows)
        self._add_flows(events, flows, ph[flows], shared)
        self._add_memory(events, memories, shared)
        self._add_events(events, rows, ts, ph[rows], name[rows], shared)

    def _shared_codes(self, events: list[Event], flows: np.ndarray, memories: np.ndarray,
                      rows: np.ndarray) -> dict[str, np.ndarray]:
        """cat/pid/tid codes (by batch position) of the events that land in a table.

        Interned in one call per batch in file order rather than table by table, so that a new
        value's code never depends on where the batch boundaries fall (see `Interner`).
        """
        with_cat = np.union1d(flows, rows)
        with_ids = np.union1d(with_cat, memories)
        codes = {}
        for key, positions in (("cat", with_cat), ("pid", with_ids), ("tid", with_ids)):
            full = np.full(len(events), -1, dtype=np.int32)
            full[positions] = self.interners[key].codes([getattr(events[i], key)
                                                         for i in positions])
            codes[key] = full
        return codes

    def _append(self, table: str, columns: dict[str, np.ndarray]) -> None:
        for column, values in columns.items():
            self.chunks[table][column].append(values)

    def _add_metadata(self, events: list[Event]) -> None:
        for e in events:
            args = e.args or _EMPTY_ARGS
            value = next((v for v in (args.label, args.labels, args.sort_index) if v is not None),
                         None)
            self.process_metadata.append(
                {"name": e.name, "pid": _id_string(e.pid), "tid": _id_string(e.tid),
                 "value": value}
            )

    def _add_flows(self, batch: list[Event], rows: np.ndarray, ph: np.ndarray,
                   shared: dict[str, np.ndarray]) -> None:
        if not rows.size:
            return
        events = [batch[i] for i in rows]
        self._append("flows", {
            "ts": floats([e.ts for e in events]),
            "ph": ph,
            "cat": shared["cat"][rows],
            "pid": shared["pid"][rows],
            "tid": shared["tid"][rows],
            "id": floats([e.id for e in events]),
            "binding": self.interners["binding"].codes([e.bp for e in events]),
        })

    def _add_memory(self, batch: list[Event], rows: np.ndarray,
                    shared: dict[str, np.ndarray]) -> None:
        if not rows.size:
            return
        events = [batch[i] for i in rows]
        args = [e.args or _EMPTY_ARGS for e in events]
        self._append("memory", {
            "ts": floats([e.ts for e in events]),
            "pid": shared["pid"][rows],
            "tid": shared["tid"][rows],
            "device_type": floats([a.mem_device_type for a in args]),
            "device_id": floats([a.mem_device_id for a in args]),
            "addr": floats([a.addr for a in args]),
            "bytes": floats([a.mem_bytes for a in args]),
            "total_allocated": floats([a.total_allocated for a in args]),
            "total_reserved": floats([a.total_reserved for a in args]),
        })

    def _add_events(self, batch: list[Event], rows: np.ndarray, ts: np.ndarray, ph: np.ndarray,
                    name: np.ndarray, shared: dict[str, np.ndarray]) -> None:
        if not rows.size:
            return
        events = [batch[i] for i in rows]
        dur = floats([e.dur for e in events])
        negative = dur < 0
        if negative.any():
            self.negative_durations += int(negative.sum())
            dur[negative] = 0.0
        cat = shared["cat"][rows]
        kind = self._kinds(cat)
        args = [e.args or _EMPTY_ARGS for e in events]
        external = floats([a.external_id for a in args])
        missing_external = np.isnan(external)
        if missing_external.any():
            external[missing_external] = floats([a.external_id_lc for a in args])[missing_external]
        base = self.event_rows
        self._append("events", {
            "ts": ts, "dur": dur, "ph": ph, "cat": cat, "kind": kind, "name": name,
            "pid": shared["pid"][rows],
            "tid": shared["tid"][rows],
            "external_id": external,
            "correlation": floats([a.correlation for a in args]),
        })
        self.event_rows += len(events)
        self._add_device_args(args, kind, base)
        self._add_op_args(args, kind, base)
        self._add_python_args(args, kind, base)

    def _kinds(self, cat_codes: np.ndarray) -> np.ndarray:
        categories = self.interners["cat"].categories
        for value in categories[len(self._kind_by_cat_code):]:
            self._kind_by_cat_code.append(int(CATEGORY_KINDS.get(value.lower(), Kind.OTHER)))
        return np.asarray(self._kind_by_cat_code, dtype=np.int8)[cat_codes]

    def _add_device_args(self, args: list[Args], kind: np.ndarray, base: int) -> None:
        rows = np.flatnonzero((kind == Kind.KERNEL) | (kind == Kind.MEMCPY) | (kind == Kind.MEMSET))
        if not rows.size:
            return
        sub = [args[i] for i in rows]
        self._append("device_args", {
            "event": rows + base,
            "device": floats([a.device for a in sub]),
            "stream": floats([a.stream for a in sub]),
            "grid": self.interners["grid"].codes(_raw_bytes([a.grid for a in sub])),
            "block": self.interners["block"].codes(_raw_bytes([a.block for a in sub])),
            "registers_per_thread": floats([a.registers_per_thread for a in sub]),
            "shared_memory": floats([a.shared_memory for a in sub]),
            "blocks_per_sm": floats([a.blocks_per_sm for a in sub]),
            "warps_per_sm": floats([a.warps_per_sm for a in sub]),
            "occupancy": floats([a.occupancy for a in sub]),
            "bytes": floats([a.bytes for a in sub]),
            "bandwidth_gbps": floats([a.bandwidth for a in sub]),
        })

    def _add_op_args(self, args: list[Args], kind: np.ndarray, base: int) -> None:
        rows = np.flatnonzero((kind == Kind.CPU_OP) | (kind == Kind.USER_ANNOTATION))
        if not rows.size:
            return
        sub = [args[i] for i in rows]
        dims = [a.input_dims if len(a.input_dims) else a.input_dims_lc for a in sub]
        self._append("op_args", {
            "event": rows + base,
            "input_dims": self.interners["input_dims"].codes(_raw_bytes(dims)),
            "input_types": self.interners["input_types"].codes(
                _raw_bytes([a.input_types for a in sub])),
            "call_stack": self.interners["call_stack"].codes([a.call_stack for a in sub]),
            "sequence_number": floats([a.sequence_number for a in sub]),
            "fwd_thread_id": floats([a.fwd_thread_id for a in sub]),
            "collective": self.interners["collective"].codes([a.collective for a in sub]),
            "in_msg_nelems": floats([a.in_msg_nelems for a in sub]),
            "out_msg_nelems": floats([a.out_msg_nelems for a in sub]),
            "group_size": floats([a.group_size for a in sub]),
            "dtype": self.interners["dtype"].codes([a.dtype for a in sub]),
            "process_group": self.interners["process_group"].codes(
                [a.process_group for a in sub]),
        })

    def _add_python_args(self, args: list[Args], kind: np.ndarray, base: int) -> None:
        rows = np.flatnonzero(kind == Kind.PYTHON_FUNCTION)
        if not rows.size:
            return
        sub = [args[i] for i in rows]
        self._append("python_args", {
            "event": rows + base,
            "python_id": floats([a.python_id for a in sub]),
            "python_parent_id": floats([a.python_parent_id for a in sub]),
            "python_module_id": floats([a.python_module_id for a in sub]),
        })

    # -- a trace parsed in two parts by two processes (see parallel.py) ------------------------

    def pop_column(self, table: str, column: str) -> np.ndarray:
        """One column concatenated, its chunks released (to ship it to another process)."""
        parts = self.chunks[table][column]
        if parts:
            values = np.concatenate(parts)
        else:
            values = np.empty(0, dtype=_np_dtype(TABLE_COLUMNS[table][column]))
        parts.clear()
        return values

    def category_luts(self, categories: dict[str, list[str]]) -> dict[str, np.ndarray]:
        """For each interner, its codes of the next part's categories (new ones appended)."""
        return {key: self.interners[key].merge(values) for key, values in categories.items()}

    def append_part_column(self, table: str, column: str, values: np.ndarray,
                           luts: dict[str, np.ndarray], event_base: int) -> None:
        """Append a column of the next part of the trace, parsed by another builder: its codes
        translated through `luts`, its `event` row numbers shifted past this part's events."""
        if TABLE_COLUMNS[table][column] == "category":
            values = luts[_INTERNER_OF.get(column, column)][values]
        elif column == "event":
            values = values + event_base
        self.chunks[table][column].append(values)

    def build(self, table: str, columns: dict[str, str]) -> pd.DataFrame:
        """Concatenate one table's chunks, freeing them column by column to bound peak memory."""
        data: dict[str, Any] = {}
        chunks = self.chunks[table]
        for column, dtype in columns.items():
            parts = chunks[column]
            values = np.concatenate(parts) if parts else np.empty(0, dtype=_np_dtype(dtype))
            parts.clear()
            release_free_memory()
            if dtype == "category":
                interner = self.interners[_INTERNER_OF.get(column, column)]
                data[column] = pd.Categorical.from_codes(
                    values, categories=pd.Index(interner.categories, dtype=object),
                    validate=False)
            else:
                data[column] = values.astype(dtype, copy=False)
        return pd.DataFrame(data, copy=False)


def release_free_memory() -> None:
    """Give freed heap pages back to the OS (glibc keeps them otherwise).

    Column chunks are small arrays that live on the heap; once concatenated they are garbage,
    but without a trim they still count in RSS while the next column is built.
    """
    if _malloc_trim is not None:
        _malloc_trim(0)


def _load_malloc_trim() -> Optional[Callable[[int], int]]:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl...): nothing to do
        return None


_malloc_trim = _load_malloc_trim()


_META, _FLOW, _INSTANT, _OTHER_PHASE = 0, 1, 2, 3
_INTERNER_OF = {"binding": "binding"}


def _phase_group(ph: str) -> int:
    if ph == "M":
        return _META
    if ph in ("s", "f", "t"):
        return _FLOW
    if ph in ("i", "I"):
        return _INSTANT
    return _OTHER_PHASE


def _np_dtype(dtype: str) -> str:
    return "int32" if dtype == "category" else dtype


def _id_string(value: Any) -> str:
    """pid/tid as strings: 7 and 7.0 and "7" are the same thread."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
