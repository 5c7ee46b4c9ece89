"""The rows a CSV export of a view's payload holds, one function per payload shape.

A view spec (`tb_plugin.views`) names its rows function; `csv_bytes` turns the rows into the CSV
the server's `format=csv` answer and `report --format csv` both write. Views whose payload holds
its table under `rows` use `payload_rows`; the others pick or build theirs in their own folder
(`views/<view>/spec.py`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .tabular import tabulate, to_csv

Rows = list[dict[str, Any]]
RowsOf = Callable[[Any], Any]


def csv_bytes(rows_of: RowsOf, payload: Any) -> bytes:
    """The CSV of a payload: its rows (or, when it has none, the payload itself) tabulated."""
    rows = rows_of(payload) if isinstance(payload, dict) else None
    return to_csv(tabulate(rows if rows is not None else payload))


def payload_rows(payload: dict[str, Any]) -> Optional[list[Any]]:
    """`payload["rows"]` when it is a list; else None (the whole payload is tabulated)."""
    rows = payload.get("rows")
    return rows if isinstance(rows, list) else None


def whole_payload(_payload: dict[str, Any]) -> None:
    """The payload is tabulated as it is (pies: their `slices`/`data`/`items` lists)."""
    return None
