"""The Python API's functions for every view of the registry, generated from the specs (so a
new view cannot be missing from the API; `tests/test_python_api_views.py` enumerates them).

A view with a hand-written function of its own (a richer frame, as `Trace.operators`) is
listed in `HAND_WRITTEN`; every other view gets a method named after it, whose keyword
arguments are the view's options (validated as the server validates its query string):

- a one-trace view (`kind` table): `Trace.<view>(**options)`;
- a pair view (diff): `Trace.<view>(other, **options)`, `other` the experiment `Trace`;
- a view of all workers of a span, of a memory-timeline export or of an allocator snapshot:
  `Logdir.<view>(run, worker=None, span=None, **options)`.

A view with a table (its CSV rows) returns it as a DataFrame, the same rows as
`report --format csv` and the server's `format=csv`; a view without one returns its payload
as a client decodes the server's JSON (a dict of the view's payload type). `Trace.view(name,
**options)` and `Logdir.view(name, run, ...)` return any view's payload. Bad options raise
`OptionError` (a ValueError), unknown names `NotFoundError`, unreadable files
`UnreadableTraceError`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

import pandas as pd

from .cache import TraceCache
from .output.encoding import plain
from .output.tabular import tabulate
from .reports import LoadError, Target, UsageError, build_report, options_from
from .views.errors import OptionError
from .views.options import option_fields
from .views.registry import SPECS
from .views.spec import PAIR, TABLE, ViewSpec

#: view -> the hand-written API function that answers it ("Class.method").
HAND_WRITTEN = {
    "overview": "Trace.overview", "operators": "Trace.operators",
    "operator_stack": "Trace.call_stacks", "kernels": "Trace.kernels",
    "memory": "Trace.memory_events", "modules": "Trace.modules", "whatif": "Trace.whatif",
    "distributed": "Logdir.collectives",
}


class NotFoundError(KeyError):
    """No run, worker or span of that name; the message names the known ones."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""


class UnreadableTraceError(ValueError):
    """The trace file could not be parsed at all (partial or truncated files still open)."""


def result(spec: ViewSpec, payload: Any) -> Any:
    """The DataFrame of the view's CSV table (nested fields as dotted columns, as the CSV), or
    the payload as a client decodes it."""
    decoded = plain(payload)
    if spec.rows is None or not isinstance(decoded, dict):
        return decoded
    rows = spec.rows(decoded)
    columns, cells = tabulate(rows if rows is not None else decoded)
    return pd.DataFrame(cells, columns=columns)


def _options(spec: ViewSpec, values: dict[str, Any]) -> Any:
    try:
        return options_from(spec, values)
    except UsageError as exc:
        raise OptionError(str(exc)) from None


class TraceViews:
    """The generated one-trace and pair views of `Trace` (its `table` attribute)."""

    table: Any

    def view(self, name: str, /, other: Optional[TraceViews] = None, **options: Any) -> Any:
        """The payload of any one-trace view (`other`: the experiment of a pair view), as a
        client decodes the server's JSON."""
        spec = SPECS.get(name)
        if spec is None or spec.kind not in (TABLE, PAIR):
            raise NotFoundError(f"no one-trace view {name!r}; views: " + ", ".join(
                n for n, s in SPECS.items() if s.kind in (TABLE, PAIR)))
        opts = _options(spec, options)
        if spec.kind == PAIR:
            if other is None:
                raise OptionError(f"the {name} view compares two traces: give other=Trace")
            return plain(spec.build(self.table, other.table, opts))
        return plain(spec.build(self.table, opts))


class LogdirViews:
    """The generated span, export and snapshot views of `Logdir` (its `logdir` and `_cache`)."""

    logdir: str
    _cache: TraceCache

    def view(self, name: str, /, run: str, worker: Optional[str] = None,
             span: Optional[str] = None, **options: Any) -> Any:
        """The payload of any view of `run` (pair views: exp_run, exp_worker, exp_span), as
        `torch-prof report` and the server build it."""
        spec = SPECS.get(name)
        if spec is None:
            raise NotFoundError(f"no view {name!r}; views: {', '.join(SPECS)}")
        exp = None
        if spec.kind == PAIR:
            if options.get("exp_run") is None:
                raise OptionError(f"the {name} view compares two runs: give exp_run=")
            exp = Target(options.pop("exp_run"), options.pop("exp_worker", None),
                         options.pop("exp_span", None))
        return plain(self._build(spec, run, worker, span, options, exp))

    def _build(self, spec: ViewSpec, run: str, worker: Optional[str], span: Optional[str],
               options: dict[str, Any], exp: Optional[Target] = None) -> Any:
        opts = _options(spec, options)
        try:
            return build_report(self.logdir, spec, opts, self._cache, Target(run, worker, span),
                                exp)
        except UsageError as exc:
            raise NotFoundError(str(exc)) from None
        except LoadError as exc:
            raise UnreadableTraceError(str(exc)) from None


def _parameters(spec: ViewSpec) -> list[inspect.Parameter]:
    return [inspect.Parameter(f.attr, inspect.Parameter.KEYWORD_ONLY, default=(
        inspect.Parameter.empty if f.required else f.default)) for f in option_fields(spec.options)]


def _doc(spec: ViewSpec) -> str:
    takes = ", ".join(f"{f.attr}: {f.description or f.kind}" for f in option_fields(spec.options))
    returns = "a DataFrame of its table (the CSV rows)" if spec.rows is not None else (
        "its payload (dict)")
    return (f"The {spec.name} view ({spec.view} tab): {spec.summary} Returns {returns}."
            + (f" Options: {takes}." if takes else ""))


def _trace_method(spec: ViewSpec) -> Callable[..., Any]:
    def method(self: TraceViews, *args: Any, **options: Any) -> Any:
        opts = _options(spec, options)
        if spec.kind == PAIR:
            (other,) = args
            return result(spec, spec.build(self.table, other.table, opts))
        return result(spec, spec.build(self.table, opts))

    first = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    if spec.kind == PAIR:
        first.append(inspect.Parameter("other", inspect.Parameter.POSITIONAL_ONLY))
    method.__signature__ = inspect.Signature(first + _parameters(spec))  # type: ignore[attr-defined]
    return method


def _logdir_method(spec: ViewSpec) -> Callable[..., Any]:
    def method(self: LogdirViews, run: str, worker: Optional[str] = None,
               span: Optional[str] = None, **options: Any) -> Any:
        return result(spec, self._build(spec, run, worker, span, options))

    selectors = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY),
                 inspect.Parameter("run", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                 inspect.Parameter("worker", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   default=None),
                 inspect.Parameter("span", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)]
    method.__signature__ = inspect.Signature(selectors + _parameters(spec))  # type: ignore[attr-defined]
    return method


def generated() -> dict[str, str]:
    """view -> "Class.method" of every generated function."""
    return {name: ("Trace." if spec.kind in (TABLE, PAIR) else "Logdir.") + name
            for name, spec in SPECS.items() if name not in HAND_WRITTEN}


for _name, _spec in SPECS.items():
    if _name in HAND_WRITTEN:
        continue
    _owner, _make = ((TraceViews, _trace_method) if _spec.kind in (TABLE, PAIR)
                     else (LogdirViews, _logdir_method))
    _method = _make(_spec)
    _method.__name__ = _method.__qualname__ = _name
    _method.__doc__ = _doc(_spec)
    setattr(_owner, _name, _method)
