"""Interning of string columns: raw values -> dense integer codes, in order of first appearance."""

from __future__ import annotations

from typing import Any, Callable, Optional

import msgspec
import numpy as np

#: Longest string a column keeps whole, in characters: a longer one (a hostile 250 MB event
#: name) keeps its first MAX_STRING_CHARS and a note of its length (`CUT_NOTE`), so the table
#: and its cache entry hold 1 Mi characters of it, not 250 MB (issue 32). Real names, shapes
#: and call stacks are far shorter.
MAX_STRING_CHARS = 1 << 20
CUT_NOTE = "\u2026 [cut: {} characters]"


def cut_string(key: str) -> str:
    """`key`, or its first MAX_STRING_CHARS characters and `CUT_NOTE` when it is longer."""
    if len(key) <= MAX_STRING_CHARS:
        return key
    return key[:MAX_STRING_CHARS] + CUT_NOTE.format(len(key))


def is_cut(key: str) -> bool:
    return len(key) > MAX_STRING_CHARS and key.endswith(" characters]")


class Interner:
    """Maps values to dense integer codes; `categories[code]` is the string.

    Codes are handed out in order of first appearance, the missing value included (interned
    first when it has a name), so the category order depends only on the sequence of values,
    never on how it was cut into batches: a parse split across two processes and merged gets
    exactly the categories of the sequential parse.

    Raw values (str, int, bytes of a JSON value...) are looked up in a dict whose misses
    normalise the value once; a column of codes is then one C-level `map` over the batch.
    """

    def __init__(self, normalize: Callable[[Any], str] = str, missing_as: Optional[str] = None):
        self.categories: list[str] = []
        self._codes: dict[str, int] = {}
        self._normalize = normalize
        self._missing = -1 if missing_as is None else self.code_of_key(missing_as)
        self._lookup = _CodeLookup(self)

    def code_of_key(self, key: str) -> int:
        """The code of an already normalised string (merging another interner's categories)."""
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.categories)
            self.categories.append(key)
        return code

    def code_of_value(self, value: Any) -> int:
        """The code of a raw value seen for the first time (None, NaN and b"" are missing)."""
        if value is None or value == b"" or (isinstance(value, float) and value != value):
            return self._missing
        return self.code_of_key(cut_string(self._normalize(value)))

    def cut(self) -> int:
        """How many of the categories were cut (`cut_string`)."""
        return sum(map(is_cut, self.categories))

    def find(self, key: str) -> int:
        """The code of a normalised string, -2 if it was never seen (nothing is interned)."""
        return self._codes.get(key, -2)

    def codes(self, values: list[Any]) -> np.ndarray:
        try:
            return np.fromiter(map(self._lookup.__getitem__, values), dtype=np.int32,
                               count=len(values))
        except TypeError:  # an unhashable value (a list where a string was expected)
            return np.fromiter(map(self._code_any, values), dtype=np.int32, count=len(values))

    def _code_any(self, value: Any) -> int:
        try:
            return self._lookup[value]
        except TypeError:
            return self.code_of_value(value)

    def merge(self, categories: list[str]) -> np.ndarray:
        """Codes in this interner of another one's categories, appending the new ones in their
        order; index the result with the other's codes (-1, "missing", maps to -1)."""
        lut = np.fromiter((self.code_of_key(c) for c in categories), dtype=np.int32,
                          count=len(categories))
        return np.append(lut, np.int32(-1))


class _CodeLookup(dict):
    """Raw value -> code; a miss asks the interner (normalising the value) and remembers it."""

    def __init__(self, interner: Interner) -> None:
        super().__init__()
        self._interner = interner

    def __missing__(self, value: Any) -> int:
        code = self._interner.code_of_value(value)
        if not isinstance(value, (str, bytes)) or len(value) <= MAX_STRING_CHARS:
            self[value] = code  # a longer raw value is not kept: only its cut category is
        return code


def json_repr(raw: bytes) -> str:
    """Python-style repr of a JSON value, as the reference shows shapes: '[[2, 8, 5], []]'."""
    try:
        return str(msgspec.json.decode(raw))
    except msgspec.DecodeError:
        return raw.decode("utf-8", "replace")


def id_string(value: Any) -> str:
    """pid/tid as strings: 7 and 7.0 and "7" are the same thread."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
