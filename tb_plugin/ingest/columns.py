"""Decoded event batches -> growing numpy columns, one list of chunks per table column.

Each batch is turned into numpy columns (strings interned to integer codes, see interning.py)
and its Structs are dropped: memory stays proportional to the columns. The column layout is
`schema.TABLE_COLUMNS`.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from ..heap import release_free_memory
from .decode import EMPTY_ARGS, NAN, NO_RAW, Args, Event
from .interning import Interner, id_string, json_repr
from .schema import CATEGORY_KINDS, MAX_TIME_US, TABLE_COLUMNS, Kind

#: `ColumnBuilder.build` gives freed memory back to the OS after a column whose chunks held at
#: least this much: `malloc_trim` walks the whole heap, which for a tiny trace cost 10% of its
#: parse (bench/many_runs.py) and freed nothing worth it.
TRIM_MIN_BYTES = 1 << 20


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


def _values(objects: list[Any], field: str) -> list[Any]:
    """`[o.<field> for o in objects]`, looped in C."""
    return list(map(attrgetter(field), objects))


def _group(objects: list[Any], fields: tuple[str, ...]) -> Optional[list[tuple[Any, ...]]]:
    """`fields` of each object as one tuple, or None when every object has them all at their
    defaults (`Args`'s own default objects: NaN, None, the empty Raw).

    For arguments most ops lack (the collective, FLOP and Inductor ones): one C-level read of
    the group and one identity comparison per object replace a read and a conversion per
    field (a 9-field group: ~200 ns an op instead of ~340).
    """
    rows = list(map(attrgetter(*fields), objects))
    if rows.count(_default_tuple(fields)) == len(rows):
        return None
    return rows


def _sparse_floats(values: list[Any]) -> np.ndarray:
    """`floats(values)` of an argument most events lack: all NaN, without converting, when
    every value is `Args`'s default (one identity comparison each)."""
    if values.count(NAN) == len(values):
        return np.full(len(values), np.nan)
    return floats(values)


def _default_tuple(fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(EMPTY_ARGS, field) for field in fields)


def _column(rows: list[tuple[Any, ...]], fields: tuple[str, ...], field: str) -> list[Any]:
    """One field of `_group`'s tuples as a list."""
    return list(map(itemgetter(fields.index(field)), rows))


def _pick(objects: list[Any], positions: np.ndarray) -> list[Any]:
    """`objects` at `positions` (all of them, uncopied, when that is every position); picked
    in C by one `itemgetter` (a third of a list comprehension's time)."""
    if len(positions) == len(objects):
        return objects
    if len(positions) < 2:  # itemgetter of one index returns the item, of none fails
        return [objects[i] for i in positions.tolist()]
    return list(itemgetter(*positions.tolist())(objects))


def _merge_positions(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two disjoint sets of batch positions as one sorted array."""
    if not len(a) or not len(b):
        return a if len(a) else b
    return np.sort(np.concatenate((a, b)), kind="stable")


class ColumnBuilder:
    """Accumulates decoded batches as numpy column chunks, one list per table column."""

    def __init__(self) -> None:
        self.interners: dict[str, Interner] = {
            "ph": Interner(missing_as=""),
            "cat": Interner(missing_as=""),
            "name": Interner(missing_as=""),
            "pid": Interner(normalize=id_string, missing_as=""),
            "tid": Interner(normalize=id_string, missing_as=""),
            "grid": Interner(normalize=json_repr),
            "block": Interner(normalize=json_repr),
            "input_dims": Interner(normalize=json_repr),
            "input_types": Interner(normalize=json_repr),
            "concrete_inputs": Interner(normalize=json_repr),
            "call_stack": Interner(),
            "collective": Interner(),
            "dtype": Interner(),
            "process_group": Interner(),
            "kernel_file": Interner(),
            "kernel_hash": Interner(),
            "kernel_backend": Interner(),
            "binding": Interner(),
        }
        self.chunks: dict[str, dict[str, list[np.ndarray]]] = {
            table: {name: [] for name in columns} for table, columns in TABLE_COLUMNS.items()
        }
        self.process_metadata: list[dict[str, Any]] = []
        self.event_rows = 0
        self.negative_durations = 0
        self.missing_timestamps = 0
        self._kind_by_cat_code: list[int] = []
        self._group_by_ph_code: list[int] = []
        self._scalars_by_name_code: list[bool] = []

    def add(self, events: list[Event]) -> None:
        if not events:
            return
        ph = self.interners["ph"].codes(_values(events, "ph"))
        name = self.interners["name"].codes(_values(events, "name"))
        group = self._phase_groups(ph)
        memory = (group == _INSTANT) & (name == self.interners["name"].find("[memory]"))
        flows = np.flatnonzero(group == _FLOW)
        memories = np.flatnonzero(memory)
        rows = np.flatnonzero((group != _META) & (group != _FLOW) & ~memory)
        if len(rows) < len(events):
            self._add_metadata(_pick(events, np.flatnonzero(group == _META)))
        timed = _pick(events, rows)
        ts = floats(_values(timed, "ts"))
        has_time = np.abs(ts) <= MAX_TIME_US  # NaN (no time) and absurd times are False
        if not has_time.all():  # an event with no time cannot be placed anywhere
            self.missing_timestamps += int((~has_time).sum())
            rows, ts = rows[has_time], ts[has_time]
        shared = self._shared_codes(events, flows, memories, rows)
        self._add_flows(events, flows, ph[flows], shared)
        self._add_memory(events, memories, shared)
        self._add_events(_pick(events, rows), ts, ph[rows], name[rows],
                         {key: codes[rows] for key, codes in shared.items()})

    def _phase_groups(self, ph_codes: np.ndarray) -> np.ndarray:
        phases = self.interners["ph"].categories
        for value in phases[len(self._group_by_ph_code):]:
            self._group_by_ph_code.append(_phase_group(value))
        return np.asarray(self._group_by_ph_code, dtype=np.int8)[ph_codes]

    def _shared_codes(self, events: list[Event], flows: np.ndarray, memories: np.ndarray,
                      rows: np.ndarray) -> dict[str, np.ndarray]:
        """cat/pid/tid codes (by batch position) of the events that land in a table.

        Interned in one call per batch in file order rather than table by table, so that a new
        value's code never depends on where the batch boundaries fall (see `Interner`).
        """
        with_cat = _merge_positions(flows, rows)
        with_ids = _merge_positions(with_cat, memories)
        picked = {"cat": _pick(events, with_cat)}
        picked["pid"] = picked["tid"] = (picked["cat"] if len(with_ids) == len(with_cat)
                                         else _pick(events, with_ids))
        codes = {}
        for key, positions in (("cat", with_cat), ("pid", with_ids), ("tid", with_ids)):
            values = self.interners[key].codes(_values(picked[key], key))
            if len(positions) == len(events):
                codes[key] = values
            else:
                codes[key] = np.full(len(events), -1, dtype=np.int32)
                codes[key][positions] = values
        return codes

    def _append(self, table: str, columns: dict[str, np.ndarray]) -> None:
        for column, values in columns.items():
            self.chunks[table][column].append(values)

    def _args(self, events: list[Event]) -> list[Args]:
        args = _values(events, "args")
        if None in args:  # an explicit `"args": null`
            args = [a if a is not None else EMPTY_ARGS for a in args]
        return args

    def _floats(self, args: list[Args], field: str) -> np.ndarray:
        """One numeric argument as float64 (NaN where absent)."""
        return floats(_values(args, field))

    def _codes(self, args: list[Args], field: str, interner: str,
               convert: Optional[Callable[[Any], Any]] = None) -> np.ndarray:
        """One string (or raw JSON) argument as interner codes (-1 where absent)."""
        values = _values(args, field)
        return self.interners[interner].codes(list(map(convert, values)) if convert else values)

    def _add_metadata(self, events: list[Event]) -> None:
        for e in events:
            args = e.args or EMPTY_ARGS
            value = next((v for v in (args.label, args.labels, args.sort_index) if v is not None),
                         None)
            self.process_metadata.append(
                {"name": e.name, "pid": id_string(e.pid), "tid": id_string(e.tid),
                 "value": value}
            )

    def _add_flows(self, batch: list[Event], rows: np.ndarray, ph: np.ndarray,
                   shared: dict[str, np.ndarray]) -> None:
        if not rows.size:
            return
        events = _pick(batch, rows)
        self._append("flows", {
            "ts": floats(_values(events, "ts")),
            "ph": ph,
            "cat": shared["cat"][rows],
            "pid": shared["pid"][rows],
            "tid": shared["tid"][rows],
            "id": floats(_values(events, "id")),
            "binding": self.interners["binding"].codes(_values(events, "bp")),
        })

    def _add_memory(self, batch: list[Event], rows: np.ndarray,
                    shared: dict[str, np.ndarray]) -> None:
        if not rows.size:
            return
        events = _pick(batch, rows)
        args = self._args(events)
        self._append("memory", {
            "ts": floats(_values(events, "ts")),
            "pid": shared["pid"][rows],
            "tid": shared["tid"][rows],
            "device_type": self._floats(args, "mem_device_type"),
            "device_id": self._floats(args, "mem_device_id"),
            "addr": self._floats(args, "addr"),
            "bytes": self._floats(args, "mem_bytes"),
            "total_allocated": self._floats(args, "total_allocated"),
            "total_reserved": self._floats(args, "total_reserved"),
        })

    def _add_events(self, events: list[Event], ts: np.ndarray, ph: np.ndarray,
                    name: np.ndarray, shared: dict[str, np.ndarray]) -> None:
        if not events:
            return
        dur = floats(_values(events, "dur"))
        negative = (dur < 0) | (dur > MAX_TIME_US)  # an absurd duration is not kept either
        if negative.any():
            self.negative_durations += int(negative.sum())
            dur[negative] = 0.0
        kind = self._kinds(shared["cat"])
        args = self._args(events)
        external = self._floats(args, "external_id")
        missing_external = np.flatnonzero(np.isnan(external))
        if missing_external.size:  # "external id" (older Kineto), read only where it may be
            external[missing_external] = _sparse_floats(
                _values(_pick(args, missing_external), "external_id_lc"))
        base = self.event_rows
        self._append("events", {
            "ts": ts, "dur": dur, "ph": ph, "cat": shared["cat"], "kind": kind, "name": name,
            "pid": shared["pid"],
            "tid": shared["tid"],
            "external_id": external,
            "correlation": _sparse_floats(_values(args, "correlation")),
        })
        self.event_rows += len(events)
        self._add_device_args(args, kind, base)
        self._add_op_args(args, kind, base, name)
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
        sub = _pick(args, rows)
        self._append("device_args", {
            "event": rows + base,
            "device": self._floats(sub, "device"),
            "stream": self._floats(sub, "stream"),
            "grid": self._codes(sub, "grid", "grid", bytes),
            "block": self._codes(sub, "block", "block", bytes),
            "registers_per_thread": self._floats(sub, "registers_per_thread"),
            "shared_memory": self._floats(sub, "shared_memory"),
            "blocks_per_sm": self._floats(sub, "blocks_per_sm"),
            "warps_per_sm": self._floats(sub, "warps_per_sm"),
            "occupancy": self._floats(sub, "occupancy"),
            "bytes": self._floats(sub, "bytes"),
            "bandwidth_gbps": self._floats(sub, "bandwidth"),
        })

    def _add_op_args(self, args: list[Args], kind: np.ndarray, base: int,
                     name: np.ndarray) -> None:
        rows = np.flatnonzero((kind == Kind.CPU_OP) | (kind == Kind.USER_ANNOTATION))
        if not rows.size:
            return
        sub = _pick(args, rows)
        rare = self._op_rare(sub)
        kernel_file = rare["kernel_file"]
        self._append("op_args", {
            "event": rows + base,
            "input_dims": self._input_dims(sub),
            "input_types": self._codes(sub, "input_types", "input_types", bytes),
            "concrete_inputs": self._sparse_codes(
                sub, self._wants_scalars(name[rows]), "concrete_inputs", bytes),
            "call_stack": self._codes(sub, "call_stack", "call_stack"),
            "sequence_number": self._floats(sub, "sequence_number"),
            "fwd_thread_id": self._floats(sub, "fwd_thread_id"),
            **rare,
            **self._kernel_args(sub, kernel_file >= 0),
        })

    def _op_rare(self, args: list[Args]) -> dict[str, np.ndarray]:
        """The collective, FLOP and Inductor-file arguments of op rows (absent: NaN / -1),
        read as one `_group`: most ops carry none of them."""
        rows = _group(args, _OP_RARE)
        if rows is None:
            return {field: (np.full(len(args), -1, dtype=np.int32) if field in _OP_RARE_CODES
                            else np.full(len(args), np.nan)) for field in _OP_RARE}
        return {field: (self.interners[field].codes(_column(rows, _OP_RARE, field))
                        if field in _OP_RARE_CODES else floats(_column(rows, _OP_RARE, field)))
                for field in _OP_RARE}

    def _sparse_codes(self, args: list[Args], where: np.ndarray, field: str,
                      convert: Optional[Callable[[Any], Any]] = None) -> np.ndarray:
        """Interner codes of one argument read only at the `where` rows (-1 elsewhere)."""
        out = np.full(len(args), -1, dtype=np.int32)
        if where.any():
            out[where] = self._codes(_pick(args, np.flatnonzero(where)), field, field, convert)
        return out

    def _kernel_args(self, args: list[Args], inductor: np.ndarray) -> dict[str, np.ndarray]:
        """The Inductor kernel arguments, read only on the ops that carry a `kernel_file`."""
        out = {key: self._sparse_codes(args, inductor, key)
               for key in ("kernel_hash", "kernel_backend")}
        for key in ("kernel_flop", "kernel_num_gb"):
            values = np.full(len(args), np.nan)
            if inductor.any():
                values[inductor] = self._floats(_pick(args, np.flatnonzero(inductor)), key)
            out[key] = values
        return out

    def _wants_scalars(self, name_codes: np.ndarray) -> np.ndarray:
        """Per op row: its `Concrete Inputs` are kept (convolutions: stride, padding, dilation,
        transposed, groups), tested once per distinct name."""
        names = self.interners["name"].categories
        for value in names[len(self._scalars_by_name_code):]:
            self._scalars_by_name_code.append("conv" in value)
        return np.asarray(self._scalars_by_name_code, dtype=bool)[name_codes]

    def _input_dims(self, args: list[Args]) -> np.ndarray:
        """"Input Dims" (PyTorch 1.x/2.x), else "Input dims" (some 1.x builds)."""
        dims = _values(args, "input_dims")
        lower = _values(args, "input_dims_lc")
        if lower.count(NO_RAW) != len(lower):  # some op wrote "Input dims"
            dims = [d if len(d) else low for d, low in zip(dims, lower)]
        return self.interners["input_dims"].codes(list(map(bytes, dims)))

    def _add_python_args(self, args: list[Args], kind: np.ndarray, base: int) -> None:
        rows = np.flatnonzero(kind == Kind.PYTHON_FUNCTION)
        if not rows.size:
            return
        sub = _pick(args, rows)
        self._append("python_args", {
            "event": rows + base,
            "python_id": self._floats(sub, "python_id"),
            "python_parent_id": self._floats(sub, "python_parent_id"),
            "python_module_id": _sparse_floats(_values(sub, "python_module_id")),
        })

    # -- a trace parsed in parts by several processes (see parallel.py) -----------------------

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
            freed = sum(part.nbytes for part in parts)
            parts.clear()
            if freed >= TRIM_MIN_BYTES:  # a tiny table's columns free nothing worth a trim
                release_free_memory()
            if dtype == "category":
                interner = self.interners[_INTERNER_OF.get(column, column)]
                data[column] = pd.Categorical.from_codes(
                    values, categories=pd.Index(interner.categories, dtype=object),
                    validate=False)
            else:
                data[column] = values.astype(dtype, copy=False)
        return pd.DataFrame(data, copy=False)


_META, _FLOW, _INSTANT, _OTHER_PHASE = 0, 1, 2, 3
_INTERNER_OF = {"binding": "binding"}
#: Arguments most ops lack, read as one `_group` (the order is the columns').
_OP_RARE = ("collective", "in_msg_nelems", "out_msg_nelems", "group_size", "dtype",
            "process_group", "seq", "flops", "kernel_file")
_OP_RARE_CODES = frozenset({"collective", "dtype", "process_group", "kernel_file"})


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
