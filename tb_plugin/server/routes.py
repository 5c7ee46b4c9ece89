"""The registry of data routes: per-(run, worker, span) payloads of a view, JSON or CSV.

Each `DataRoute` names its view, its options (validated into a dict) and a builder over a parsed
table. Analysis modules are imported on first use, so a view that is missing or broken costs only
its own routes. Adding a route here adds it to the plugin; `tb_plugin/openapi.yaml` documents it
(a test checks that both agree).
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


Option = Any  # Choice | TopN | Text
Builder = Callable[[Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class DataRoute:
    path: str  # route under /data/plugin/torch_prof, e.g. "/operators/pies"
    view: str  # the view (views.VIEWS) the worker span must offer
    build: Builder
    options: tuple[Option, ...] = ()
    table: Callable[[Any], Table] = tabulate  # the payload's table, for format=csv

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


def _steps_table(payload: Any) -> Table:
    steps = payload.get("steps") if isinstance(payload, dict) else None
    return tabulate(steps if isinstance(steps, list) else payload)


_OPERATOR_GROUP = Choice("group_by", OPERATOR_GROUPS, "operator")
_KERNEL_GROUP = Choice("group_by", KERNEL_GROUPS, "kernel")

DATA_ROUTES: dict[str, DataRoute] = {
    route.path: route
    for route in (
        DataRoute("/overview", "Overview", _overview, table=_steps_table),
        DataRoute("/operators", "Operator", _operators, (_OPERATOR_GROUP,)),
        DataRoute("/operators/pies", "Operator", _operator_pies, (_OPERATOR_GROUP, TopN())),
        DataRoute("/operators/stack", "Operator", _operator_stack,
                  (_OPERATOR_GROUP, Text("name"), Text("input_shape", required=False))),
        DataRoute("/kernels", "Kernel", _kernels, (_KERNEL_GROUP,)),
        DataRoute("/kernels/pies", "Kernel", _kernel_pies, (TopN(),)),
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
