"""The CLI's data commands: `export LOGDIR --run R --format parquet OUT/ [--replace]` and
`sql LOGDIR|EXPORT "SELECT ..."` (see `tb_plugin.sql`). Errors are one line on stderr: exit 2
for what the user can fix in the command (an unknown run, a non-empty OUT, bad SQL), 1 for
failures (DuckDB missing, a write that failed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .cache import TraceCache
from .cli_common import cache_of
from .discovery import RunInfo, discover_runs
from .sql import (
    VIEWS,
    ExportFailed,
    ExportRefused,
    SqlError,
    SqlUnavailable,
    export_runs,
    is_export,
    query,
    query_runs,
)


def add_parser(commands: Any) -> None:
    export = commands.add_parser("export", help="write a run's parsed tables as Parquet")
    export.add_argument("logdir")
    export.add_argument("--run", action="append", required=True,
                        help="run to export (repeat for several)")
    export.add_argument("--format", choices=("parquet",), default="parquet")
    export.add_argument("out", help="output folder (one sub-folder per table): new or empty, "
                        "unless --replace")
    export.add_argument("--replace", action="store_true",
                        help="OUT holds an earlier export: replace its files of these runs "
                        "(other runs' files stay)")
    sql = commands.add_parser("sql", help="run one SQL statement (DuckDB) over the tables",
                              description="Views: " + ", ".join(VIEWS) + ".")
    sql.add_argument("source", help="a logdir (exported on the fly) or a `torch-prof export` "
                     "folder")
    sql.add_argument("statement", help='e.g. "SELECT name, sum(dur) FROM events GROUP BY 1"')
    sql.add_argument("--run", action="append", help="only these runs of a logdir")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    cache = cache_of(args)
    try:
        if args.command == "export":
            runs = _runs(args.logdir, args.run, cache)
            count = export_runs(runs, Path(args.out), cache, replace=args.replace)
            sys.stderr.write(f"wrote {count} trace file(s) of {len(runs)} run(s) to {args.out}\n")
            return 0
        source = Path(args.source)
        if "://" not in args.source and not source.exists():
            raise LookupError(f"{args.source} does not exist")
        frame = query(source, args.statement) if is_export(source) else query_runs(
            _runs(args.source, args.run, cache), args.statement, cache)
    except (SqlUnavailable, ExportFailed) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except OSError as exc:  # reading the logdir or the cache
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except LookupError as exc:
        sys.stderr.write(f"error: {exc.args[0]}\n")
        return 2
    except (SqlError, ExportRefused) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(frame.to_json(orient="records") + "\n")
    else:
        sys.stdout.write(frame.to_string(index=False) + "\n")
    return 0


def _runs(logdir: str, names: Any, cache: TraceCache) -> list[RunInfo]:
    runs = discover_runs(logdir, serve_outside_logdir=cache.config.serve_outside_logdir)
    if not names:
        return runs
    known = {run.name: run for run in runs}
    missing = [name for name in names if name not in known]
    if missing:
        raise LookupError(f"unknown run(s) {', '.join(missing)}; known: "
                          f"{', '.join(known) or 'none'}")
    return [known[name] for name in names]
