"""The Kernel view's specs, builders and CSV rows."""

from __future__ import annotations

from typing import Any

from ...analysis.kernels import build_kernel_pies, build_kernels
from ...output import rows
from ..spec import ViewSpec
from .options import KernelOptions, KernelPieOptions
from .payload import KernelPiesPayload, KernelsPayload


def kernels(table: Any, options: KernelOptions) -> Any:
    return build_kernels(table, group_by=options.group_by)

def kernel_pies(table: Any, options: KernelPieOptions) -> Any:
    return build_kernel_pies(table, options.top_n)


SPECS: tuple[ViewSpec, ...] = (
    ViewSpec("kernels", "/kernels", "Kernel", kernels,
             payload=KernelsPayload, options=KernelOptions,
             rows=rows.whole_payload,
             summary='GPU kernel table (`{"rows": [...]}`); 404 when the worker ran no '
                     'kernel.'),
    ViewSpec("kernel_pies", "/kernels/pies", "Kernel", kernel_pies,
             payload=KernelPiesPayload, options=KernelPieOptions,
             rows=rows.whole_payload,
             summary="Top-N kernel pie and tensor-core share; 404 when the worker ran no "
                     "kernel."),
)
