"""The Operator (its efficiency sections) view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.efficiency.compiled import build_compiled
from ...analysis.efficiency.roofline import build_roofline
from ...output import rows
from ..options import NoOptions
from ..spec import ViewSpec
from .payload import CompiledPayload, RooflinePayload


def compiled(table: Any, _options: NoOptions) -> Any:
    return build_compiled(table)

def roofline(table: Any, _options: NoOptions) -> Any:
    return build_roofline(table)


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("compiled", "/compiled", "Operator", compiled,
             payload=CompiledPayload, rows=rows.whole_payload,
             summary="torch.compile regions -> Inductor kernels (source file, hash, backend) "
                     "-> device time, guard and launch overhead, extern ops.",
             description="A section of the Operator view (always offered: a CPU run has "
             "compiled regions but no\nKernel view). Shape: see "
             "`tb_plugin.analysis.efficiency.compiled.build_compiled`."),
    ViewSpec("roofline", "/roofline", "Operator", roofline,
             payload=RooflinePayload, rows=rows.whole_payload,
             summary="FLOPs and bytes per operator, the precision it ran in, achieved TFLOP/s "
                     "and TB/s, arithmetic intensity, compute/memory bound, MBU, above-roof "
                     "flags, and MFU and MBU per step.",
             description="A section of the Operator view. The device's peaks come from the "
             "documented table in\n`tb_plugin.analysis.efficiency.hardware`. Shape: see "
             "`tb_plugin.analysis.efficiency.roofline.build_roofline`."),
)
