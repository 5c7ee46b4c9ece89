"""A small YAML writer for the OpenAPI document (block style; every string quoted as JSON, which
YAML reads as a double-quoted scalar, or written as a `|` block when it spans lines)."""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN_KEY = re.compile(r"[A-Za-z_$/][A-Za-z0-9_$/{}.\-]*")
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def dump(value: Any) -> str:
    return "\n".join(_lines(value, 0)) + "\n"


def _key(key: str) -> str:
    plain = _PLAIN_KEY.fullmatch(key) and key.lower() not in _RESERVED
    return key if plain else json.dumps(key, ensure_ascii=False)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):  # only empty ones get here
        return "{}"
    if isinstance(value, list):
        return "[]"
    return json.dumps(value, ensure_ascii=False)


def _nested(value: Any) -> bool:
    return isinstance(value, (dict, list)) and bool(value)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _entry(f"{pad}{_key(str(key))}:", item, indent)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                nested = _lines(item, indent + 2)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out += nested[1:]
            else:
                out += _entry(f"{pad}-", item, indent)
    return out


def _entry(head: str, item: Any, indent: int) -> list[str]:
    if _nested(item):
        return [head] + _lines(item, indent + 2)
    if isinstance(item, str) and "\n" in item.rstrip("\n"):
        chomp = "" if item.endswith("\n") else "-"
        body = item[:-1] if item.endswith("\n") else item
        pad = " " * (indent + 2)
        return [f"{head} |{chomp}"] + [f"{pad}{line}".rstrip() for line in body.split("\n")]
    return [f"{head} {_scalar(item)}"]
