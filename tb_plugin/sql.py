"""The parsed tables as Parquet, and SQL over them with DuckDB (`torch-prof export`, `sql`).

`export_runs` writes, for every worker span of the chosen runs, one Parquet file per table under
`OUT/<table>/` (`events`, `device_args`, `op_args`, `python_args`, `memory`, `flows`) plus
one row per file in `OUT/traces/`; every row carries `run`, `worker` and `span`, and the
`events` rows their `event` number, which the side tables' `event` column refers to. Interned
strings become plain strings and absent numbers NULL. `query` opens an export (or exports a
logdir to a temporary folder first) and runs one SQL statement in DuckDB over views named
after the tables. Tables are read one at a time through the cache, so the memory used is one
trace's, whatever the run's size. DuckDB (`pip install "torch-prof[sql]"`) writes and reads
the Parquet files itself: pyarrow is not needed (and is not imported, since pandas 3 would
then load it at every start).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from .cache import TraceCache
from .discovery import RunInfo
from .ingest.schema import TABLE_COLUMNS, TraceTable
from .load import load_trace

#: The per-file table beside the parsed tables: one row per worker span.
TRACES = "traces"
VIEWS = (*TABLE_COLUMNS, TRACES)


class SqlUnavailable(RuntimeError):
    """DuckDB is not installed."""


class SqlError(ValueError):
    """DuckDB rejected the statement (syntax, unknown table or column...)."""


def duckdb() -> Any:
    try:
        return importlib.import_module("duckdb")
    except ImportError as exc:
        raise SqlUnavailable(f'Parquet export and SQL need DuckDB ({exc}): pip install '
                             '"torch-prof[sql]"') from None


def export_runs(runs: Iterable[RunInfo], out: Path, cache: TraceCache) -> int:
    """Write the tables of every worker span of `runs` under `out`; the number of files."""
    db = duckdb().connect()
    count = 0
    for name in VIEWS:
        (out / name).mkdir(parents=True, exist_ok=True)
    for run in runs:
        for worker, spans in run.workers.items():
            for span in spans:
                table = load_trace(span.ref, cache=cache)
                keys = {"run": run.name, "worker": worker, "span": span.span}
                frames = {name: _frame(name, frame, keys) for name, frame in
                          table.tables().items()}
                frames[TRACES] = _traces_row(table, keys, span.ref.url, span.ref.size)
                for name, frame in frames.items():
                    _write(db, frame, out / name / f"{count:06d}.parquet")
                count += 1
    db.close()
    return count


def query(folder: Path, statement: str) -> pd.DataFrame:
    """Run `statement` over an export folder, the tables as views."""
    module = duckdb()
    db = module.connect()
    try:
        for name in VIEWS:
            if any((folder / name).glob("*.parquet")):
                pattern = str(folder / name / "*.parquet").replace("'", "''")
                db.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                           f"read_parquet('{pattern}', union_by_name = true)")
        return db.execute(statement).df()
    except module.Error as exc:
        raise SqlError(str(exc)) from None
    finally:
        db.close()


def query_runs(runs: Iterable[RunInfo], statement: str, cache: TraceCache,
               scratch: Optional[Path] = None) -> pd.DataFrame:
    """Export `runs` to a temporary folder, then `query` it."""
    folder = Path(tempfile.mkdtemp(prefix="torch-prof-sql-", dir=scratch))
    try:
        export_runs(runs, folder, cache)
        return query(folder, statement)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def is_export(folder: Path) -> bool:
    return (folder / TRACES).is_dir()


def _frame(name: str, frame: pd.DataFrame, keys: dict[str, str]) -> pd.DataFrame:
    columns: dict[str, Any] = {key: np.full(len(frame), value, dtype=object)
                               for key, value in keys.items()}
    if name == "events":
        columns["event"] = np.arange(len(frame), dtype=np.int64)
    for column, dtype in TABLE_COLUMNS[name].items():
        series = frame[column]
        if dtype == "category":
            columns[column] = series.astype(object).to_numpy()
        elif dtype == "float64":
            columns[column] = series.astype("Float64")  # NaN (absent) -> NULL
        else:
            columns[column] = series.to_numpy()
    return pd.DataFrame(columns)


def _traces_row(table: TraceTable, keys: dict[str, str], url: str, size: int) -> pd.DataFrame:
    info = table.metadata.distributed_info or {}
    return pd.DataFrame({
        **{key: [value] for key, value in keys.items()},
        "file": [url], "bytes": [size], "state": [str(table.status.state)],
        "events": [int(table.event_count)],
        "rank": pd.array([_int(info.get("rank"))], dtype="Int64"),
        "world_size": pd.array([_int(info.get("world_size"))], dtype="Int64"),
        "backend": [info.get("backend")],
        "framework": [table.metadata.framework],
    })


def _int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _write(db: Any, frame: pd.DataFrame, path: Path) -> None:
    db.register("frame", frame)
    try:
        target = str(path).replace("'", "''")
        db.execute(f"COPY frame TO '{target}' (FORMAT PARQUET)")
    finally:
        db.unregister("frame")
