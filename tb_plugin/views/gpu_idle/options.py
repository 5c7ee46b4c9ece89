"""The option Structs of the GPU Idle view (read by `views/options.py` for the query string and
the CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
from msgspec import Meta

from ...analysis.gpu_idle.view import (
    DEFAULT_DELAY_CUTOFF_US,
    DEFAULT_KERNEL_WAIT_US,
    DEFAULT_QUEUE_FULL,
    DEFAULT_RUNTIME_CUTOFF_US,
)

Micros = Annotated[float, Meta(ge=0, le=1e9)]

class GpuIdleOptions(msgspec.Struct, forbid_unknown_fields=True):
    kernel_wait_us: Annotated[Micros, Meta(description=(
        "Longest gap between queued kernels counted as kernel wait, us."))
    ] = DEFAULT_KERNEL_WAIT_US
    runtime_cutoff_us: Annotated[Micros, Meta(description=(
        "Launch calls longer than this are runtime outliers, us."))] = DEFAULT_RUNTIME_CUTOFF_US
    delay_cutoff_us: Annotated[Micros, Meta(description=(
        "Launch delays longer than this are outliers, us."))] = DEFAULT_DELAY_CUTOFF_US
    queue_full: Annotated[int, Meta(ge=1, le=1_000_000, description=(
        "Queue length counted as full."))] = DEFAULT_QUEUE_FULL
    step: Optional[Annotated[str, Meta(description=(
        "Step whose critical path event ids are returned (default: the first)."))]] = None

class WhatIfOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    edit: Annotated[str, Meta(min_length=1, max_length=2000, description=(
        "Edits separated by `;`, each TARGET=FACTOR: `op:NAME` or `op~REGEX` (an operator's "
        "host time and its device work), `kernel:NAME`/`kernel~REGEX`, `dataloader`, "
        "`communication`, `memcpy`, `launch` (launch calls), `sync` (waiting for the device); "
        "FACTOR in [0, 100] multiplies the time (0 removes it)."))]
    step: Optional[Annotated[str, Meta(max_length=200, description=(
        "Replay only this step (default: every step, up to 64)."))]] = None

class WhatIfRunOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    edit: Annotated[str, Meta(min_length=1, max_length=2000, description=(
        "Run-level edits separated by `;`, each TARGET=FACTOR: `rank:NAME` (a worker or rank "
        "number: its segments between collectives move to the other ranks' median, 0 = "
        "fully), `straggler` (the same for the rank imposing the most wait), `transfer` "
        "(collectives' transfer time; `transfer=0` overlaps communication fully); FACTOR in "
        "[0, 100]."))]
