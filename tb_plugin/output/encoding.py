"""JSON encoding of analysis payloads, shared by the server and the CLI (no TensorBoard import)."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec


def _encode_extra(value: Any) -> Any:
    """numpy/pandas scalars and arrays in analysis payloads -> plain JSON values."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


_encoder = msgspec.json.Encoder(enc_hook=_encode_extra)


def encode_json(payload: Any) -> bytes:
    """UTF-8 JSON; NaN and infinities become null (browsers reject bare NaN)."""
    return _encoder.encode(payload)


def pretty_json(payload: Any) -> str:
    """Indented JSON, encoded as `encode_json` encodes it (what `report` prints)."""
    return msgspec.json.format(encode_json(payload), indent=2).decode("utf-8") + "\n"


def plain(payload: Any) -> Any:
    """A payload as a client decodes it (numpy values as Python ones, NaN as None)."""
    return json.loads(encode_json(payload))
