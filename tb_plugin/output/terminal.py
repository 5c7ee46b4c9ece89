"""A view's table for people at a terminal (`report --format table`), drawn with `rich`.

The rows are the same ones the CSV export writes (`rows.csv_bytes`), so the terminal table and
`--format csv` never disagree on what a view's table is. Numbers get thousands separators and at
most three decimals. A table wider than the terminal is split into several tables of the
columns that fit, each repeating the first (label) column, instead of squeezing every cell.
Columns empty in every row are left out (the CSV keeps them).
"""

from __future__ import annotations

from typing import Any, Optional, TextIO

from rich.console import Console
from rich.table import Table

from .rows import RowsOf
from .tabular import tabulate

_MAX_TEXT = 48  # a text column wider than this wraps its cells


def table_text(rows_of: Optional[RowsOf], payload: Any, out: TextIO, title: str = "",
               width: Optional[int] = None) -> None:
    """Write the payload's table (its CSV rows) to `out` as boxed terminal tables. A table of
    several (a first column named `table`, as the GPU Idle view's) is drawn as one table per
    value of that column, each with its own non-empty columns."""
    rows = rows_of(payload) if rows_of is not None and isinstance(payload, dict) else None
    columns, cells = tabulate(rows if rows is not None else payload)
    console = Console(file=out, width=width, soft_wrap=False, highlight=False)
    if columns[:1] == ["table"] and cells:
        parts: dict[Any, list[list[Any]]] = {}
        for row in cells:
            parts.setdefault(row[0], []).append(row[1:])
        for name, part in parts.items():
            _draw(console, *_drop_empty(columns[1:], part), f"{title}: {name}" if title
                  else str(name))
    else:
        _draw(console, *_drop_empty(columns, cells), title)
    console.print(f"{len(cells):,} rows")


def _draw(console: Console, columns: list[str], cells: list[list[Any]], title: str) -> None:
    text = [[_cell(value) for value in row] for row in cells]
    numeric = [_numeric(cells, i) for i in range(len(columns))]
    widths = [min(_MAX_TEXT if not numeric[i] else 10**6,
                  max([len(name)] + [len(row[i]) for row in text])) for i, name in
              enumerate(columns)]
    for group in _groups(widths, console.width):
        table = Table(title=title or None, header_style="bold")
        for i in group:
            if numeric[i]:
                table.add_column(columns[i], justify="right", no_wrap=True)
            else:
                table.add_column(columns[i], overflow="fold", min_width=widths[i])
        for row in text:
            table.add_row(*(row[i] for i in group))
        console.print(table)


def _drop_empty(columns: list[str], cells: list[list[Any]]
                ) -> tuple[list[str], list[list[Any]]]:
    """Without the columns whose every cell is empty (None or ""): the CSV keeps them, a
    terminal has no room for them. No rows, or no column with a value: every column stays."""
    keep = [i for i in range(len(columns)) if any(row[i] not in (None, "") for row in cells)]
    if not keep:
        return columns, cells
    return [columns[i] for i in keep], [[row[i] for i in keep] for row in cells]


def _groups(widths: list[int], total: int) -> list[list[int]]:
    """Column indices per table: the first column, then as many more as fit in `total`."""
    if len(widths) <= 1:
        return [list(range(len(widths)))]
    groups: list[list[int]] = []
    current, used = [0], widths[0] + 4
    for i in range(1, len(widths)):
        if len(current) > 1 and used + widths[i] + 3 > total:
            groups.append(current)
            current, used = [0], widths[0] + 4
        current.append(i)
        used += widths[i] + 3
    groups.append(current)
    return groups


def _numeric(cells: list[list[Any]], i: int) -> bool:
    values = [row[i] for row in cells if row[i] not in (None, "")]
    return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                for v in values)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value == value else "NaN"
    return str(value)
