"""The Module view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.modules import build_modules
from ...output.rows import Rows
from ..errors import NotInTrace
from ..options import NoOptions
from ..spec import ViewSpec
from .payload import ModulesPayload


def modules(table: Any, _options: NoOptions) -> Any:
    payload = build_modules(table)
    if not payload.get("available"):
        raise NotInTrace(payload.get("message") or "no module events in this worker span")
    return payload


def module_rows(payload: dict[str, Any]) -> Rows:
    """The module tree, depth first, one row per module with its key and depth."""
    out: Rows = []

    def walk(rows: Rows, depth: int) -> None:
        for row in rows:
            out.append({"depth": depth, **{k: v for k, v in row.items() if k != "children"}})
            walk(row.get("children") or [], depth + 1)

    walk(payload.get("rows") or [], 0)
    return out


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("modules", "/modules", "Module", modules,
             payload=ModulesPayload, rows=module_rows,
             summary="Module view (nn.Module hierarchy with stats, flame graph, backward "
                     "attribution).",
             description="Shape: see `tb_plugin.analysis.modules.build_modules`. 404 (with "
             "the reason) when the\nmodule hierarchy cannot be built. With `format=csv`, the "
             "module tree depth first, one row\nper module with its `key` and `depth`."),
)
