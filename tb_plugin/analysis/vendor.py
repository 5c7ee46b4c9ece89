"""Which vendor made a trace's GPU: NVIDIA (CUDA), AMD (ROCm/HIP) or unknown.

Read from what the trace carries, never guessed from `computeMajor` (AMD's ROCm writes the GFX
generation there, e.g. 9.0 for MI250, which is not a CUDA compute capability):
1. `deviceProperties[device]`, by `hardware.device_vendor` (the one set of rules: AMD-only keys,
   names that say the vendor, wavefront size);
2. else the runtime calls: HIP (`hip*`) means AMD, CUDA (`cuda*`/`cu*`) means NVIDIA.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..ingest.schema import LAUNCH_KINDS, TraceTable
from .efficiency import hardware
from .events import kind_mask, name_mask
from .launch import device_properties

Vendor = Literal["nvidia", "amd", "unknown"]



def vendor_of_properties(props: dict) -> Vendor:
    """The vendor a `deviceProperties` entry names (`hardware.device_vendor`'s rules); unknown
    when it names none."""
    found = hardware.device_vendor(props)
    return "amd" if found == hardware.AMD else "nvidia" if found == hardware.NVIDIA else "unknown"


def runtime_vendor(table: TraceTable) -> Vendor:
    """The vendor of the trace's runtime/driver calls (`hip*` or `cuda*`/`cu*`)."""
    events = table.events
    launches = kind_mask(events, LAUNCH_KINDS)
    if not launches.any():
        return "unknown"
    hip = launches & name_mask(events, lambda n: n.str.startswith("hip"))
    cuda = launches & name_mask(events, lambda n: n.str.match(r"cu[A-Z]|cuda"))
    n_hip, n_cuda = int(np.count_nonzero(hip)), int(np.count_nonzero(cuda))
    if n_hip == n_cuda:
        return "unknown"
    return "amd" if n_hip > n_cuda else "nvidia"


def device_vendor(table: TraceTable, device: int) -> Vendor:
    """Vendor of GPU `device`: its properties first, else the runtime calls' API."""
    vendor = vendor_of_properties(device_properties(table, device))
    return vendor if vendor != "unknown" else runtime_vendor(table)


def trace_vendor(table: TraceTable) -> Vendor:
    """One vendor for the whole trace: the devices' (when they agree), else the runtime's."""
    found = {vendor_of_properties(p) for p in table.metadata.device_properties or []
             if isinstance(p, dict)} - {"unknown"}
    if len(found) == 1:
        return found.pop()  # type: ignore[return-value]
    return runtime_vendor(table)
