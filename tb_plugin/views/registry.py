"""The registry: one line per view folder; its specs in the order the CLI lists them.

A view lives in one folder, `views/<view>/` (beside `frontend/src/views/<view>/`): its specs,
builders and CSV rows (`spec.py`), options (`options.py`) and payload types (`payload.py`).
Adding a view is that folder, its analysis, its frontend folder and one line below: the
server's routes, the CLI's `report --view` names and flags, and `openapi.yaml`
(`python -m tb_plugin.views.openapi`) follow from the specs.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .diff.spec import SPECS as DIFF
from .distributed.spec import SPECS as DISTRIBUTED
from .efficiency.spec import SPECS as EFFICIENCY
from .errors import OptionError
from .findings.spec import SPECS as FINDINGS
from .gpu_idle.spec import SPECS as GPU_IDLE
from .inference.spec import SPECS as INFERENCE
from .kernels.spec import SPECS as KERNELS
from .memory.spec import SPECS as MEMORY
from .modules.spec import SPECS as MODULES
from .operators.spec import SPECS as OPERATORS
from .options import option_fields
from .overview.spec import SPECS as OVERVIEW
from .ranks.spec import SPECS as RANKS
from .spec import ViewSpec
from .trace.spec import SPECS as TRACE

SPECS: dict[str, ViewSpec] = {spec.name: spec for spec in (
    *OVERVIEW, *OPERATORS, *KERNELS, *EFFICIENCY, *TRACE, *MEMORY, *MODULES, *DISTRIBUTED,
    *RANKS, *GPU_IDLE, *DIFF, *INFERENCE, *FINDINGS,
)}

ROUTES: dict[str, ViewSpec] = {spec.route: spec for spec in SPECS.values()}


def build_view(first: Any, view: str, /, *more: Any, **options: Any) -> Any:
    """The payload of view spec `name`, options given by attribute name, for scripts, tests and
    benchmarks: `build_view(table, "timeline", width=500)`; `build_view(tables, "distributed",
    skipped)`; `build_view(base, "diff", exp, path="0-1")`; `build_view(table_or_none,
    "memory_timeline", export)`. Options are validated as the server validates them."""
    spec = SPECS[view]
    params = {field.attr: field.param for field in option_fields(spec.options)}
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise OptionError(f"{', '.join(unknown)} not taken by the {view} view")
    named = {params[attr]: value for attr, value in options.items()}
    return spec.build(first, *more, msgspec.convert(named, spec.options))
