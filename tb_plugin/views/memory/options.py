"""The option Structs of the Memory view (read by `views/options.py` for the query string and the
CLI's flags alike)."""

from __future__ import annotations

from typing import Annotated, Optional

import msgspec
from msgspec import Meta

from ..option_types import EndUs, StartUs, TimeUs


class MemoryOptions(msgspec.Struct, forbid_unknown_fields=True):
    device: Optional[Annotated[str, Meta(description=(
        "A device name from `devices` (e.g. `CPU`, `GPU0`)."))]] = None
    start_us: StartUs = None
    end_us: EndUs = None

SnapshotUnits = ("In the payload's `clock`: trace us (`trace`), the snapshot's own us "
                 "(`snapshot`) or entry numbers (`entry`).")

class SnapshotOptions(msgspec.Struct, forbid_unknown_fields=True):
    snapshot: Optional[Annotated[str, Meta(description=(
        "A snapshot file name from `snapshots`; default the one named after the span's "
        "trace, else the run's first."))]] = None
    device: Optional[Annotated[str, Meta(description=(
        "A device name from `devices` (e.g. `GPU0`); default the first."))]] = None
    start: Optional[Annotated[float, TimeUs, Meta(description="Range start. " + SnapshotUnits)]
                    ] = None
    end: Optional[Annotated[float, TimeUs, Meta(description="Range end. " + SnapshotUnits)]
                  ] = None
    at: Optional[Annotated[float, TimeUs, Meta(description=(
        "The instant of `segments`; default the peak. " + SnapshotUnits))]] = None
