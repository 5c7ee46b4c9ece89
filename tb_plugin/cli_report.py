"""`torch-prof report LOGDIR --run R [--worker W] [--span S] --view VIEW`: one view of one
trace, exactly the payload the server returns (the same view specs of
`tb_plugin.views.registry`, read from the same options, and the same CSV tables), built by
`reports.build_report`, which lists only the runs named. Usage errors (unknown names, options
a view does not take, a bad window, a missing logdir) exit with 2, with the message the server
answers with 400 or 404; a trace that cannot be read exits with 1. `--format table` leads with
the payload's conclusions (`output/conclusions.py`), then its table without empty columns.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cli_common import cache_of
from .output.conclusions import conclusions_text
from .output.encoding import pretty_json
from .output.rows import csv_bytes
from .output.terminal import table_text
from .reports import (
    LoadError,
    Target,
    UsageError,
    build_report,
    view_aliases,
    view_spec,
)
from .views.errors import NotInTrace, OptionError, Unreadable
from .views.options import OptionField, option_fields, read_options
from .views.registry import SPECS
from .views.spec import PAIR, SPAN, ViewSpec
from .views.tabs import VIEWS

_EPILOG = """\
--view takes a data view name ({views}) or a tab name ({tabs}).
--worker and --span default to the run's first worker and its first span.
"""


def add_parser(commands: Any) -> None:
    tabs = ", ".join(view.name.lower() for view in VIEWS.values()
                     if view.name.lower() in view_aliases())
    report = commands.add_parser(
        "report", help="print one view of one trace",
        epilog=_EPILOG.format(views=", ".join(SPECS), tabs=tabs),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    report.add_argument("--run", required=True, help="the run (a folder name, as `summary` "
                        "lists it)")
    report.add_argument("--worker", help="default: the first worker of the run")
    report.add_argument("--span", help="default: the first span of the worker")
    report.add_argument("--view", required=True, help=f"a data view ({', '.join(SPECS)}) or "
                        f"a tab name ({tabs})")
    for flag, takers in option_flags().items():
        report.add_argument(flag, dest=takers[0][1].attr, help=_flag_help(takers))
    for side in ("run", "worker", "span"):
        report.add_argument(f"--exp-{side}", help=f"diff: the {side} to compare with" + (
            " (required)" if side == "run" else f" (default: its first {side})"))
    report.add_argument("--format", choices=("table", "json", "csv"), default=None,
                        help="table (default on a terminal): the conclusions, then the table; "
                        "json (default when piped): the server's payload; csv: the view's "
                        "table as the server's CSV export")


def option_flags() -> dict[str, list[tuple[str, OptionField]]]:
    """Every view option's flag, with the views that take it and their fields."""
    flags: dict[str, list[tuple[str, OptionField]]] = {}
    for spec in SPECS.values():
        for field in option_fields(spec.options):
            flags.setdefault(field.flag, []).append((spec.name, field))
    return flags


def _flag_help(takers: list[tuple[str, OptionField]]) -> str:
    first = takers[0][1]
    choices = dict.fromkeys(c for _, field in takers for c in field.choices)
    text = " | ".join(choices) if choices else first.description or first.param
    if first.default is not None and not choices:
        text += f" (default {first.default})"
    if first.param != first.attr:
        text += f" (parameter {first.param})"
    return f"{', '.join(name for name, _ in takers)}: {text}"


def run(args: argparse.Namespace) -> int:
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    try:
        spec = view_spec(args.view)
        options = _options(args, spec)
        exp = Target(args.exp_run, args.exp_worker, args.exp_span) if args.exp_run else None
        payload = build_report(args.logdir, spec, options, cache_of(args),
                               Target(args.run, args.worker, args.span), exp)
        if fmt == "table" and spec.rows is not None:
            sys.stdout.write(conclusions_text(spec.name, payload))
            table_text(spec.rows, payload, sys.stdout, title=f"{args.run}: {spec.name}")
            return 0
        text = _csv(spec, payload) if fmt == "csv" else pretty_json(payload)
    except (LoadError, Unreadable) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except (UsageError, OptionError, NotInTrace) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(text)
    return 0


def _options(args: argparse.Namespace, spec: ViewSpec) -> Any:
    """The spec's options from the flags, read as the server reads its query string."""
    fields = {field.param: field for field in option_fields(spec.options)}
    taken = {field.attr for field in fields.values()}
    if spec.kind == PAIR:
        taken |= {"exp_run", "exp_worker", "exp_span"}
    every = [takers[0][1].attr for takers in option_flags().values()]
    every += ["exp_run", "exp_worker", "exp_span"]
    if spec.kind == SPAN:  # it covers every worker of the span
        every.append("worker")
    extra = [name for name in every if getattr(args, name) is not None and name not in taken]
    if extra:
        flags = ", ".join("--" + name.replace("_", "-") for name in extra)
        why = " (it covers every worker of the span)" if extra == ["worker"] else ""
        raise UsageError(f"{flags} not taken by --view {spec.name}{why}")
    if spec.kind == PAIR and args.exp_run is None:
        raise UsageError(f"--view {spec.name} needs --exp-run (the run to compare with)")
    for field in fields.values():
        if field.required and getattr(args, field.attr) is None:
            raise UsageError(f"--view {spec.name} needs {field.flag}")
    return read_options(spec.options, lambda param: getattr(args, fields[param].attr))


def _csv(spec: ViewSpec, payload: Any) -> str:
    """The payload's table as CSV, exactly as the server's `format=csv` answer for that view
    (nested fields as dotted columns, formula-like cells prefixed with `'`)."""
    if spec.rows is None:
        raise UsageError(f"the {spec.name} view has no table; use --format json")
    return csv_bytes(spec.rows, payload).decode("utf-8")
