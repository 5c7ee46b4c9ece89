"""The parsed tables as Parquet, and SQL over them with DuckDB (`torch-prof export`, `sql`).

`export_runs` writes, for every worker span of the chosen runs, one Parquet file per table under
`OUT/<table>/` (`events`, `device_args`, `op_args`, `python_args`, `memory`, `flows`) plus
one row per file in `OUT/traces/`; every row carries `run`, `worker` and `span`, and the
`events` rows their `event` number, which the side tables' `event` column refers to. Interned
strings become plain strings and absent numbers NULL. `query` opens an export (or exports a
logdir to a temporary folder first) and runs one SQL statement in DuckDB over views named
after the tables. Tables are read one at a time through the cache, so the memory used is one
trace's, whatever the run's size.

An export goes into a new or empty folder; into one holding anything else it is refused
(`ExportRefused`), unless `replace`: then the folder must be an earlier export (only table
folders of numbered Parquet files) and the earlier files of the exported runs are removed,
those of other runs kept. The new files are written to a folder beside `out` first and moved in
only once all are written, so a failed export leaves `out` as it was. Folder paths are taken
literally: `x[1]` is never the glob that matches `x1` (DuckDB globs every path it reads).

DuckDB (`pip install "torch-prof[sql]"`) writes and reads
the Parquet files itself: pyarrow is not needed (and is not imported, since pandas 3 would
then load it at every start).
"""

from __future__ import annotations

import glob
import importlib
import os
import re
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


class ExportRefused(ValueError):
    """The output folder cannot take the export: it holds other files (and `replace` was not
    given), it is not a folder, or `replace` was given for a folder that is not an export."""


class ExportFailed(RuntimeError):
    """Writing the export failed (no space, no permission, ...); the folder is as it was."""


#: The files of an export's table folders: `NNNNNN.parquet`, one per worker span.
_EXPORT_FILE = re.compile(r"[0-9]{6,}\.parquet")


def duckdb() -> Any:
    try:
        return importlib.import_module("duckdb")
    except ImportError as exc:
        raise SqlUnavailable(f'Parquet export and SQL need DuckDB ({exc}): pip install '
                             '"torch-prof[sql]"') from None


def export_runs(runs: Iterable[RunInfo], out: Path, cache: TraceCache, *,
                replace: bool = False) -> int:
    """Write the tables of every worker span of `runs` under `out`; the number of files.
    `replace`: `out` may hold an earlier export, whose files of these runs are replaced."""
    runs, out = list(runs), out.absolute()  # `.` has a name and a parent
    earlier = _replaced_files(out, sorted({run.name for run in runs}), replace)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
    except OSError as exc:
        raise ExportFailed(f"cannot write beside {out}: {exc}") from None
    try:
        count = _write_export(runs, stage, cache)
        for path in earlier:
            path.unlink()
        _move_in(stage, out)
    except OSError as exc:
        raise ExportFailed(f"cannot write the export to {out}: {exc}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return count


def _write_export(runs: list[RunInfo], out: Path, cache: TraceCache) -> int:
    module = duckdb()
    db = module.connect()
    count = 0
    for name in VIEWS:
        (out / name).mkdir(parents=True, exist_ok=True)
    try:
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
    except module.Error as exc:
        raise ExportFailed(f"DuckDB could not write the export: {exc}") from None
    finally:
        db.close()
    return count


def _replaced_files(out: Path, runs: list[str], replace: bool) -> list[Path]:
    """The files of `runs` in an earlier export at `out` (none for a new or empty folder);
    ExportRefused when `out` cannot take the export (see the module's docstring)."""
    if out.exists() and not out.is_dir():
        raise ExportRefused(f"{out} is not a folder")
    entries = sorted(out.iterdir()) if out.is_dir() else []
    if not entries:
        return []
    if not replace:
        raise ExportRefused(f"{out} is not empty ({len(entries)} entries, e.g. "
                            f"{entries[0].name!r}): give a new or empty folder, or --replace "
                            f"to replace the export of {', '.join(runs)} in it")
    foreign = [e.name for e in entries if not _is_table_folder(e)]
    if foreign or not is_export(out):
        what = repr(foreign[0]) if foreign else f"no {TRACES}/ folder"
        raise ExportRefused(f"--replace only replaces runs in an earlier export, and {out} "
                            f"is not one (it holds {what}); nothing was changed")
    stems = _stems_of(out, runs)
    return [entry / f"{stem}.parquet" for entry in entries for stem in stems
            if (entry / f"{stem}.parquet").is_file()]


def _is_table_folder(entry: Path) -> bool:
    return entry.is_dir() and not entry.is_symlink() and entry.name in VIEWS and all(
        _EXPORT_FILE.fullmatch(f.name) and f.is_file() and not f.is_symlink()
        for f in entry.iterdir())


def _stems_of(folder: Path, runs: list[str]) -> list[str]:
    """The file numbers (`000003`) of an export's worker spans of `runs`."""
    module = duckdb()
    db = module.connect()
    try:
        rows = db.execute(f"SELECT run, filename FROM read_parquet({_files(folder, TRACES)}, "
                          "filename = true)").fetchall()
    except module.Error as exc:
        raise ExportRefused(f"the earlier export in {folder} cannot be read: {exc}") from None
    finally:
        db.close()
    return sorted({Path(path).name[: -len(".parquet")] for run, path in rows if run in runs})


def _move_in(stage: Path, out: Path) -> None:
    """Move the staged files into `out`, numbered after the files already there."""
    out.mkdir(parents=True, exist_ok=True)
    taken = [int(f.name[: -len(".parquet")]) for name in VIEWS if (out / name).is_dir()
             for f in (out / name).iterdir() if _EXPORT_FILE.fullmatch(f.name)]
    first = max(taken, default=-1) + 1
    for name in VIEWS:
        (out / name).mkdir(exist_ok=True)
        for path in sorted((stage / name).iterdir()):
            number = first + int(path.name[: -len(".parquet")])
            os.replace(path, out / name / f"{number:06d}.parquet")


def _files(folder: Path, name: str) -> str:
    """A SQL string literal of the glob of `folder/name/*.parquet`, the folder taken literally
    (its `[`, `*` and `?` escaped: DuckDB globs every path it reads)."""
    pattern = glob.escape(str(folder / name)) + "/*.parquet"
    return "'" + pattern.replace("'", "''") + "'"


def query(folder: Path, statement: str) -> pd.DataFrame:
    """Run `statement` over an export folder, the tables as views."""
    module = duckdb()
    db = module.connect()
    try:
        for name in VIEWS:
            if any((folder / name).glob("*.parquet")):
                db.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                           f"read_parquet({_files(folder, name)}, union_by_name = true)")
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
