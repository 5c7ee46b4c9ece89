"""The registry of data routes: per-(run, worker, span) payloads of a view, JSON or CSV.

Each `DataRoute` names its view, its options (validated into a dict), a builder over a parsed
table, its CSV table (None: JSON only) and where its payloads are cached: on disk (`DISK`, the
default: one entry per file version and options), only in the in-memory body LRU (`MEMORY`, for
many small variants such as zoomed ranges), or not at all (`NONE`: timeline windows, each a new
key and cheap once the index is built). Builders go through `analysis.report`, the code path the
CLI uses. Analysis modules are imported on first use, so a view that is missing or broken costs
only its own routes. Adding a route here adds it to the plugin; `tb_plugin/openapi.yaml`
documents it (a test checks that both agree). Routes over several files (distributed, diff,
memory/timeline, trace/download) live in `handlers.py`.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlencode

from .api import Query
from .errors import BadRequest, NotFound, NotImplementedYet
from .tabular import Table, tabulate

OPERATOR_GROUPS = ("operator", "operator_input_shape")
KERNEL_GROUPS = ("kernel", "kernel_op_launch")
MAX_TOP_N = 1_000_000
MAX_WIDTH = 16384  # timeline pixels (the builder's own cap)
MAX_SEARCH_LIMIT = 10_000
MAX_EVENT_ID = 2**62
DISK, MEMORY, NONE = "disk", "memory", "none"


@dataclass(frozen=True)
class Choice:
    name: str
    values: tuple[str, ...]
    default: str

    def parse(self, query: Query) -> Any:
        return query.choice(self.name, self.values, self.default)


@dataclass(frozen=True)
class TopN:
    """Optional positive integer; absent means no limit (the UI's "all")."""

    name: str = "top_n"

    def parse(self, query: Query) -> Any:
        return query.positive_int(self.name, MAX_TOP_N)


@dataclass(frozen=True)
class Text:
    name: str
    required: bool = True

    def parse(self, query: Query) -> Any:
        return query.text(self.name, required=self.required)


@dataclass(frozen=True)
class Number:
    """Optional finite number (a time in trace us)."""

    name: str

    def parse(self, query: Query) -> Any:
        return query.number(self.name)


@dataclass(frozen=True)
class Integer:
    name: str
    minimum: int
    maximum: int
    required: bool = False

    def parse(self, query: Query) -> Any:
        return query.integer(self.name, self.minimum, self.maximum, required=self.required)


Option = Any  # Choice | TopN | Text | Number | Integer
Builder = Callable[[Any, dict[str, Any]], Any]
TableOf = Callable[[Any], Table]


def _always_disk(_options: dict[str, Any]) -> str:
    return DISK


@dataclass(frozen=True)
class DataRoute:
    path: str  # route under /data/plugin/torch_prof, e.g. "/operators/pies"
    view: str  # the view (views.VIEWS) the worker span must offer
    build: Builder
    options: tuple[Option, ...] = ()
    table: Optional[TableOf] = tabulate  # the payload's table, for format=csv (None: no CSV)
    cache: Callable[[dict[str, Any]], str] = _always_disk  # DISK, MEMORY or NONE per options
    #: Idempotent work on the table that the store may already be doing in the background
    #: (the timeline index): run through `RunStore.prepare` before `build`.
    prepare: Optional[Callable[[Any], Any]] = None

    def parse(self, query: Query) -> dict[str, Any]:
        return {option.name: option.parse(query) for option in self.options}

    def payload_key(self, options: dict[str, Any]) -> str:
        """Cache key of a payload: route, options and the analysis code's fingerprint."""
        shown = sorted((k, "" if v is None else str(v)) for k, v in options.items())
        return f"torch-prof-server{self.path}?{urlencode(shown)}#{analysis_fingerprint()}"

    def compute(self, table: Any, options: dict[str, Any]) -> Any:
        try:
            return self.build(table, options)
        except ImportError as exc:
            raise NotImplementedYet(f"the {self.view} view is not available in this "
                                    f"version ({exc})") from exc


# -- builders (lazy imports) ---------------------------------------------------------------------


def _overview(table: Any, _options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    return build_view(table, "overview")


def _operators(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    return build_view(table, "operators", group_by=options["group_by"])


def _operator_pies(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.operators import build_operator_pies

    return build_operator_pies(table, options["top_n"], options["group_by"])


def _operator_stack(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.operators import UnknownOperatorError, build_call_stacks

    shape = options["input_shape"]
    if shape is not None and options["group_by"] != "operator_input_shape":
        raise BadRequest("input_shape is only meaningful with group_by=operator_input_shape")
    try:
        return build_call_stacks(table, options["name"], shape, options["group_by"])
    except UnknownOperatorError as exc:
        shown = options["name"][:120] + (f" with input shape {shape[:120]}" if shape else "")
        raise NotFound(f"no operator {shown!r} in this worker span") from exc


def _kernels(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    return build_view(table, "kernels", group_by=options["group_by"])


def _kernel_pies(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.kernels import build_kernel_pies

    return build_kernel_pies(table, options["top_n"])


def warm_timeline(table: Any) -> None:
    """The timeline index and counter tracks of a table (seconds on a big trace, then memoised
    on the table): run in the background when a table is read, and before timeline requests."""
    from ..analysis.timeline_counters import timeline_extras

    timeline_extras(table)  # builds the index first


def _timeline(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    window = {k: v for k, v in options.items() if v is not None}
    try:
        return build_view(table, "timeline", **window)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def _timeline_event(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    try:
        return build_view(table, "timeline_event", event_id=options["id"])
    except KeyError as exc:
        raise NotFound(f"no event {options['id']} in this worker span") from exc


def _timeline_search(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view
    from ..analysis.timeline import SEARCH_LIMIT

    limit = options["limit"] or SEARCH_LIMIT
    return build_view(table, "timeline_search", query=options["q"], limit=limit,
                      start_us=options["start_us"])


def _memory(table: Any, options: dict[str, Any]) -> Any:
    from ..analysis.memory import UnknownDeviceError
    from ..analysis.report import build_view

    start, end = options["start_us"], options["end_us"]
    if start is not None and end is not None and start >= end:
        raise BadRequest(f"bad memory range [{start}, {end}]: need start_us < end_us")
    try:
        return build_view(table, "memory", **options)
    except UnknownDeviceError as exc:
        device = str(options["device"])[:120]
        raise NotFound(f"no memory records of device {device!r} in this worker span") from exc


def _memory_cache(options: dict[str, Any]) -> str:
    """The full-range payload on disk; zoomed ranges (one key each) in memory only."""
    return DISK if options["start_us"] is None and options["end_us"] is None else MEMORY


def _modules(table: Any, _options: dict[str, Any]) -> Any:
    from ..analysis.report import build_view

    payload = build_view(table, "modules")
    if not payload.get("available"):
        raise NotFound(payload.get("message") or "no module events in this worker span")
    return payload


def rows_table(view: str) -> TableOf:
    """The CSV table of a payload of `view`, as the CLI writes it (`report.view_rows`)."""

    def table(payload: Any) -> Table:
        from ..analysis.report import view_rows

        rows = view_rows(view, payload)
        return tabulate(rows if rows is not None else payload)

    return table


def _no_cache(_options: dict[str, Any]) -> str:
    return NONE


_OPERATOR_GROUP = Choice("group_by", OPERATOR_GROUPS, "operator")
_KERNEL_GROUP = Choice("group_by", KERNEL_GROUPS, "kernel")
_WINDOW = (Number("start_us"), Number("end_us"))

DATA_ROUTES: dict[str, DataRoute] = {
    route.path: route
    for route in (
        DataRoute("/overview", "Overview", _overview, table=rows_table("overview")),
        DataRoute("/operators", "Operator", _operators, (_OPERATOR_GROUP,)),
        DataRoute("/operators/pies", "Operator", _operator_pies, (_OPERATOR_GROUP, TopN())),
        DataRoute("/operators/stack", "Operator", _operator_stack,
                  (_OPERATOR_GROUP, Text("name"), Text("input_shape", required=False))),
        DataRoute("/kernels", "Kernel", _kernels, (_KERNEL_GROUP,)),
        DataRoute("/kernels/pies", "Kernel", _kernel_pies, (TopN(),)),
        DataRoute("/timeline", "Trace", _timeline, (*_WINDOW, Integer("width", 1, MAX_WIDTH)),
                  table=None, cache=_no_cache, prepare=warm_timeline),
        DataRoute("/timeline/event", "Trace", _timeline_event,
                  (Integer("id", 0, MAX_EVENT_ID, required=True),),
                  table=None, cache=_no_cache, prepare=warm_timeline),
        DataRoute("/timeline/search", "Trace", _timeline_search,
                  (Text("q"), Integer("limit", 1, MAX_SEARCH_LIMIT), Number("start_us")),
                  table=rows_table("timeline_search"), cache=_no_cache, prepare=warm_timeline),
        DataRoute("/memory", "Memory", _memory, (Text("device", required=False), *_WINDOW),
                  table=rows_table("memory"), cache=_memory_cache),
        DataRoute("/modules", "Module", _modules, table=rows_table("modules")),
    )
}


def register_route(route: DataRoute) -> None:
    DATA_ROUTES[route.path] = route


# -- analysis fingerprint -------------------------------------------------------------------------

_fingerprint: Optional[str] = None
_fingerprint_lock = threading.Lock()


def analysis_fingerprint() -> str:
    """A hash of the analysis (and ingest) sources: payloads cached on disk by an older version
    of the code are never served after an upgrade or a local edit."""
    global _fingerprint
    with _fingerprint_lock:
        if _fingerprint is None:
            package = Path(__file__).resolve().parent.parent
            digest = hashlib.sha1()
            for folder in ("analysis", "ingest", "server"):
                for path in sorted((package / folder).glob("*.py")):
                    digest.update(path.name.encode())
                    digest.update(path.read_bytes())
            _fingerprint = digest.hexdigest()[:16]
        return _fingerprint
