"""Typed descriptions of the JSON bodies that are not a view's payload: the catalogue
(`/runs`, `/views`, `/viewspecs`, `/workers`, `/spans`, `/status`, `/diff/default`), the 202
loading reply and every error; and `common.py`, what the views' payload types share (`doc`,
view names, pie slices). Each view's own payload types are in its folder
(`views/<view>/payload.py`) and named by its specs; from both come the schemas of
`openapi.yaml` and so the frontend's types. This package is a leaf: it imports only typing,
typing_extensions and msgspec, so any layer may import it.
"""

from .capture import CaptureAccepted, CaptureForm, CaptureProgress, CaptureTargets
from .catalogue import (
    DiffDefault,
    Error,
    Loading,
    NameList,
    RunListing,
    SpanStatusDetail,
    ViewList,
    ViewSpecs,
)

#: The routes that are not views -> the type of their 200 JSON body. The view routes' types are
#: on their specs (`tb_plugin.views.registry.SPECS[...].payload`), the one registry of views.
CATALOGUE: dict[str, type] = {
    "/runs": RunListing,
    "/views": ViewList,
    "/viewspecs": ViewSpecs,
    "/workers": NameList,
    "/spans": NameList,
    "/status": SpanStatusDetail,
    "/diff/default": DiffDefault,
    "/capture/targets": CaptureTargets,
    "/capture": CaptureAccepted,
    "/capture/status": CaptureProgress,
}

#: The replies that are not a route's payload: 202 while loading, and every error.
REPLIES: dict[str, type] = {"loading": Loading, "error": Error}

__all__ = ["CATALOGUE", "REPLIES", "CaptureAccepted", "CaptureForm", "CaptureProgress",
           "CaptureTargets", "DiffDefault", "Error", "Loading", "NameList", "RunListing",
           "SpanStatusDetail", "ViewList", "ViewSpecs"]
