"""A view's options: a msgspec `Struct` (types, bounds, defaults), read from strings once.

The server's query string and the CLI's flags both arrive as text; `read_options` validates them
into the spec's Struct with the same messages, so a bad `width` is the same 400 on the server
and the same exit 2 in the CLI. A text option with a `pattern` must match it whole (a
trailing newline too is refused) and one with `max_length` be at most that long: the pattern
is checked here, before any builder splits the text. The query-string name of a field is its
msgspec name (`q`, `id`); the CLI flag is its attribute name (`--query`, `--event-id`).
`option_fields` describes the fields for the CLI's flags and the OpenAPI parameters.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

import msgspec
from msgspec import inspect as mi

from .errors import OptionError

#: name -> the raw text given for it (None: not given); raises OptionError itself if it must.
Lookup = Callable[[str], Optional[str]]


class NoOptions(msgspec.Struct, forbid_unknown_fields=True):
    """A view that takes no options."""


@dataclass(frozen=True)
class OptionField:
    attr: str  # Python attribute and CLI flag (`--` + dashes)
    param: str  # query-string name
    kind: str  # "choice", "integer", "number" or "text"
    required: bool
    default: Any
    choices: tuple[str, ...] = ()
    minimum: Any = None  # bounds (integers: always set; numbers: None = unbounded)
    maximum: Any = None
    description: str = ""
    pattern: Optional[str] = None  # text: the whole value must match it (msgspec `pattern`)
    max_length: Optional[int] = None  # text: characters

    @property
    def flag(self) -> str:
        return "--" + self.attr.replace("_", "-")


def option_fields(options: type[msgspec.Struct]) -> list[OptionField]:
    return [_field(f) for f in mi.type_info(options).fields]  # type: ignore[attr-defined]


def _field(field: Any) -> OptionField:
    kind, description = field.type, ""
    if isinstance(kind, mi.UnionType):
        kind = next(t for t in kind.types if not isinstance(t, mi.NoneType))
    if isinstance(kind, mi.Metadata):
        description = (kind.extra_json_schema or {}).get("description", "")
        kind = kind.type
    default = None if field.default is msgspec.NODEFAULT else field.default
    common = {"attr": field.name, "param": field.encode_name, "required": field.required,
              "default": default, "description": description}
    if isinstance(kind, mi.LiteralType):
        return OptionField(kind="choice", choices=tuple(kind.values), **common)
    if isinstance(kind, mi.IntType):
        if kind.ge is None or kind.le is None:
            raise TypeError(f"option {field.name}: an integer option needs ge and le bounds")
        return OptionField(kind="integer", minimum=kind.ge, maximum=kind.le, **common)
    if isinstance(kind, mi.FloatType):
        return OptionField(kind="number", minimum=kind.ge, maximum=kind.le, **common)
    if isinstance(kind, mi.StrType):
        return OptionField(kind="text", pattern=kind.pattern, max_length=kind.max_length,
                           **common)
    raise TypeError(f"option {field.name}: unsupported type {kind!r}")


def read_options(options: type[msgspec.Struct], lookup: Lookup) -> Any:
    """The Struct of the values `lookup` gives, each checked against its field."""
    values = {}
    for field in option_fields(options):
        raw = lookup(field.param)
        if raw is not None:
            values[field.attr] = _parse(field, raw)
        elif field.required:
            raise OptionError(f"missing parameter {field.param!r}")
    return options(**values)


def _parse(field: OptionField, value: str) -> Any:
    name = field.param
    if field.kind == "choice":
        if value not in field.choices:
            raise OptionError(f"parameter {name!r} must be one of {', '.join(field.choices)}; "
                              f"got {value[:60]!r}")
        return value
    if field.kind == "integer":
        low, high = field.minimum, field.maximum  # both set (see _field); low >= 0: no sign
        if not (value.isascii() and value.isdigit()) or not low <= int(value) <= high:
            raise OptionError(f"parameter {name!r} must be an integer from {low} to {high}; "
                              f"got {value[:60]!r}")
        return int(value)
    if field.kind == "number":
        try:
            number = float(value) if value.isascii() else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise OptionError(f"parameter {name!r} must be a finite number; got {value[:60]!r}")
        low, high = field.minimum, field.maximum
        if (low is not None and number < low) or (high is not None and number > high):
            raise OptionError(f"parameter {name!r} must be a number from {low:g} to {high:g}; "
                              f"got {value[:60]!r}")
        return number
    if field.max_length is not None and len(value) > field.max_length:
        raise OptionError(f"parameter {name!r} is longer than {field.max_length} characters")
    if field.pattern is not None and re.fullmatch(field.pattern, value) is None:
        raise OptionError(f"parameter {name!r} is malformed ({field.description}); got "
                          f"{value[:60]!r}")
    return value
