"""JSON payloads -> CSV, for the `&format=csv` answer of every table route.

Payload shapes differ per view (`{"rows": [{...}]}`, `{"columns", "rows": [[...]]}`, pies with
`slices`, sections of those), so `tabulate` finds the table in any of them instead of each route
knowing its own layout. Nested objects become dotted columns (`breakdown_us.Kernel`).
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

Table = tuple[list[str], list[list[Any]]]

#: Spreadsheets run cells starting with these as formulas; trace names are untrusted text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


def tabulate(value: Any) -> Table:
    """Best-effort table of a JSON payload."""
    if isinstance(value, list):
        return _from_list(value, None)
    if not isinstance(value, dict):
        return ["value"], [[value]]
    for key in ("rows", "slices", "data", "items"):
        inner = value.get(key)
        if isinstance(inner, list):
            return _from_list(inner, value.get("columns"))
        if key == "data" and isinstance(inner, dict):
            return tabulate(inner)
    sections = [(k, v) for k, v in value.items() if _table_like(v)]
    if sections:
        return _sections(sections)
    flat = _flatten(value)
    return list(flat), [list(flat.values())]


def _table_like(value: Any) -> bool:
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, (dict, list)) for v in value)
    return isinstance(value, dict) and any(isinstance(value.get(k), list)
                                           for k in ("rows", "slices", "data", "items"))


def _sections(sections: list[tuple[str, Any]]) -> Table:
    columns: list[str] = ["section"]
    records: list[dict[str, Any]] = []
    for name, sub in sections:
        sub_columns, sub_rows = tabulate(sub)
        columns += [c for c in sub_columns if c not in columns]
        records += [{"section": name, **dict(zip(sub_columns, row))} for row in sub_rows]
    return columns, [[r.get(c) for c in columns] for r in records]


def _from_list(items: list[Any], columns: Any) -> Table:
    if items and all(isinstance(item, dict) for item in items):
        flat = [_flatten(item) for item in items]
        names: dict[str, None] = {}
        for record in flat:
            names.update(dict.fromkeys(record))
        return list(names), [[record.get(n) for n in names] for record in flat]
    if items and all(isinstance(item, (list, tuple)) for item in items):
        width = max(len(item) for item in items)
        names = _column_names(columns, width)
        return names, [list(item) + [None] * (width - len(item)) for item in items]
    return ["value"], [[item] for item in items]


def _column_names(columns: Any, width: int) -> list[str]:
    names = []
    for i in range(width):
        column = columns[i] if isinstance(columns, list) and i < len(columns) else None
        if isinstance(column, dict):
            column = column.get("name") or column.get("title") or column.get("key")
        names.append(str(column) if column not in (None, "") else f"column_{i + 1}")
    return names


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        value = json.dumps(value, default=str)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def to_csv(table: Table) -> bytes:
    columns, rows = table
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([_cell(c) for c in columns])
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return out.getvalue().encode("utf-8")


def csv_filename(*parts: str) -> str:
    """A safe download name from run/worker/span/route (no quotes, slashes or spaces)."""
    name = "-".join(_UNSAFE_FILENAME.sub("_", p).strip("._") or "x" for p in parts)
    return name[:150] + ".csv"
