"""Command line: `torch-prof summary|report|export|sql|mcp ...`.

This module is the thin entry: it builds the top-level parser from `COMMANDS` (names and one
line of help each) and imports only the module of the command being run (`importlib`), so
`torch-prof --help` and usage errors answer without importing pandas or the view registry.
A command module exposes `add_parser(commands)`, which adds its sub-parser(s) to argparse's
sub-parsers action, and `run(args) -> int`, the exit status. Registering a new command module is
one line of `COMMANDS` per command it adds.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Optional

from .settings import CACHE_DIR_ENV

#: command -> (its module, its one-line help in `torch-prof --help`).
COMMANDS: dict[str, tuple[str, str]] = {
    "summary": ("tb_plugin.cli_summary", "runs, workers, spans, event counts, status"),
    "report": ("tb_plugin.cli_report", "print one view of one trace"),
    "export": ("tb_plugin.cli_data", "write a run's parsed tables as Parquet"),
    "sql": ("tb_plugin.cli_data", "run one SQL statement (DuckDB) over the tables"),
    "mcp": ("tb_plugin.cli_mcp", "serve a logdir's views to AI agents (MCP over stdio)"),
    "compare": ("tb_plugin.cli_compare",
                "regression verdict of EXP against BASE (or --baseline NAME)"),
    "baseline": ("tb_plugin.cli_compare", "save or list named baselines"),
    "capture": ("tb_plugin.cli_capture", "ask a running job to record its next N steps"),
}
#: Global options that take a value (skipped when looking for the command in argv).
_VALUED = ("--cache-dir",)

_DESCRIPTION = """\
Read PyTorch profiler traces without a browser: list what a logdir holds, or print one view
of one trace (the same numbers the TensorBoard tab shows)."""

_EPILOG = """\
examples:
  {prog} summary ./logs
      every run, worker and span under ./logs with its state and event count

  {prog} report ./logs --run resnet --view findings
      what matters in the run's first worker and span, as compact JSON

  {prog} report ./logs --run resnet --view operator
      the Operator table of the run's first worker and span, as a table on a terminal

  {prog} report ./logs --run resnet --worker host_1 --span 2 --view kernel --format csv
      the Kernel table of one worker span as CSV (--format json: the server's JSON)

  {prog} report ./logs --run resnet --view diff --exp-run resnet_amp
      the Diff of two runs (their first worker and span each)

  {prog} summary s3://bucket/logs --cluster ray://head:10001 --cache-dir s3://bucket/cache
      parse every file on a Ray cluster, into a cache the cluster's nodes share

  {prog} sql ./logs "SELECT name, sum(dur) FROM events GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
      one SQL statement over the parsed tables ({prog} export: the tables as Parquet)

  {prog} mcp ./logs
      an MCP server on stdin/stdout: one tool per view, plus findings, list_runs and sql

{prog} report --help lists the views (--view) and their options.
"""


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog=_program_name(), description=_DESCRIPTION,
        epilog=_EPILOG.format(prog=_program_name()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", help=f"parsed-trace cache (default ${CACHE_DIR_ENV}, "
                        "else the user cache folder)")
    parser.add_argument("--no-cache", action="store_true", help="always parse from scratch")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = _command_of(argv)
    module = importlib.import_module(COMMANDS[chosen][0]) if chosen else None
    if module is not None:
        module.add_parser(commands)
    for name, (path, text) in COMMANDS.items():
        if chosen is None or path != COMMANDS[chosen][0]:
            commands.add_parser(name, help=text)  # its own flags come with its module
    args = parser.parse_args(argv)
    assert module is not None  # argparse exits on a missing or unknown command
    return int(module.run(args))


def _command_of(argv: list[str]) -> Optional[str]:
    """The command named in argv (the first word that is not a global option or its value)."""
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _program_name() -> str:
    """`torch-prof` when run as the console script, `python -m tb_plugin` for the module."""
    name = os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "torch-prof")
    return "python -m tb_plugin" if name in ("__main__.py", "-m", "-c", "") else name


if __name__ == "__main__":
    sys.exit(main())
