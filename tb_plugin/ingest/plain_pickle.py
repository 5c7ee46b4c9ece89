"""A pure pickle reader for plain data: a stack machine over a size-checked buffer.

`pickle.Unpickler` with a `find_class` that refuses everything still makes its own
allocations on the file's say: a `LONG_BINPUT` of memo index 2**28 makes it allocate a 2 GB
memo table, a length prefix makes it ask the stream for that many bytes, and the opcodes
themselves are unlimited. Here every byte is read from a buffer that is already in memory and
whose size was checked before it was read, and every allocation is bounded by `PickleLimits`:

- a string, bytes or integer length must fit in what is left of the buffer (integers: at most
  `max_int_bytes`);
- a memo index must be an existing entry (get) or at most one past the last (put, memoize), as
  every pickler writes them: the memo never grows by more than one entry per opcode;
- at most `max_objects` new objects (numbers, strings, bytes, containers; None and booleans are
  not new) and `max_ops` opcodes in all (each memo get or DUP pushes one more reference to a
  value, so a value repeated a million times costs a million opcodes);
- at most `max_marks` open MARKs (nested containers being built);
- dict keys, set and frozenset items must be flat: str, bytes, int, float, bool, None or a tuple
  of those (hashing never recurses);
- only the opcodes of plain data (dict, list, tuple, set, frozenset, str, bytes, int, float,
  bool, None): any class or function reference, persistent id, extension code or out-of-band
  buffer is refused with `PickleRefused` before anything is built from it.

Nothing recurses while reading, so a deeply nested value costs its bytes only. Every failure is
a `PickleError` (a ValueError) with a short message; nothing else escapes `read_plain`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any


class PickleError(ValueError):
    """The buffer is not a readable plain-data pickle, or it exceeds a limit."""


class PickleRefused(PickleError):
    """The pickle refers to code (a class, a function, a persistent id)."""


@dataclass(frozen=True)
class PickleLimits:
    max_objects: int = 32 << 20
    max_ops: int = 128 << 20
    max_marks: int = 1000
    max_int_bytes: int = 1024


#: Digits of a text integer (INT, LONG): Python's own default `int_max_str_digits`.
_MAX_DIGITS = 4300
_FLAT = (str, bytes, int, float, bool, type(None))
_UNPACK_I = struct.Struct("<i").unpack_from
_UNPACK_H = struct.Struct("<H").unpack_from
_UNPACK_L = struct.Struct("<I").unpack_from
_UNPACK_Q = struct.Struct("<Q").unpack_from
#: The opcodes that build a new object (counted against `max_objects`).
_BUILDS = frozenset({
    0x8a, 0x8b, 0x4b, 0x4a, 0x4d, 0x49, 0x4c,  # LONG1, LONG4, BININT1, BININT, BININT2, INT, LONG
    0x47, 0x46,  # BINFLOAT, FLOAT
    0x8c, 0x58, 0x8d, 0x56, 0x54, 0x55, 0x53,  # unicode and (Python 2) strings
    0x42, 0x43, 0x8e, 0x96,  # BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
    0x7d, 0x64, 0x5d, 0x6c, 0x29, 0x74, 0x85, 0x86, 0x87,  # dicts, lists, tuples
    0x8f, 0x91,  # EMPTY_SET, FROZENSET
})
_REFUSED = {0x52: "REDUCE", 0x62: "BUILD", 0x6f: "OBJ", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX",
            0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x97: "NEXT_BUFFER",
            0x98: "READONLY_BUFFER"}
_CODE = ("a memory snapshot holds only dicts, lists, tuples, strings, numbers, booleans and "
         "None (nothing from the file was run)")


def refuse_global(module: Any, name: Any) -> PickleRefused:
    return PickleRefused(f"refused: the pickle refers to {str(module)[:80]}.{str(name)[:80]}; "
                         + _CODE)


def _key(value: Any) -> Any:
    """`value` if hashing it cannot recurse (flat, or a tuple of flat values)."""
    if isinstance(value, _FLAT) or (isinstance(value, tuple) and
                                    all(isinstance(v, _FLAT) for v in value)):
        return value
    raise PickleError(f"a dict key or set item is a {type(value).__name__} (not a plain key)")


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview, limits: PickleLimits) -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)  # for line searches
        self.buf = memoryview(self.data)
        self.end = len(self.buf)
        self.pos = 0
        self.limits = limits
        self.objects = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or n > self.end - self.pos:
            raise PickleError(f"a length of {n} bytes at offset {self.pos} runs past the end "
                              f"of the data ({self.end} bytes)")
        start = self.pos
        self.pos = start + n
        return self.buf[start:self.pos]

    def line(self) -> bytes:
        start = self.pos
        stop = self.data.find(b"\n", start)
        if stop < 0:
            raise PickleError(f"a text argument at offset {start} has no end of line")
        self.pos = stop + 1
        return self.data[start:stop]


def read_plain(data: bytes | bytearray | memoryview, limits: PickleLimits = PickleLimits()
               ) -> tuple[Any, int]:
    """The object a plain-data pickle encodes and the number of objects it built."""
    reader = _Reader(data, limits)
    try:
        return _run(reader), reader.objects
    except PickleError:
        raise
    except (UnicodeDecodeError, ValueError, TypeError, struct.error, OverflowError, IndexError,
            KeyError) as exc:
        raise PickleError(f"at offset {reader.pos}: {type(exc).__name__}: {str(exc)[:200]}"
                          ) from exc


def _run(r: _Reader) -> Any:  # noqa: C901 - one dispatch loop, opcode by opcode
    buf, take, line = r.buf, r.take, r.line
    limits = r.limits
    max_objects, max_ops, max_marks = limits.max_objects, limits.max_ops, limits.max_marks
    stack: list[Any] = []
    marks: list[int] = []
    memo: list[Any] = []
    push = stack.append
    ops = 0
    objects = 0

    def pop_mark() -> list[Any]:
        if not marks:
            raise PickleError("an opcode needs a MARK that was never set")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def frame() -> int:
        """Values on the stack above the last MARK."""
        return len(stack) - (marks[-1] if marks else 0)

    def put(index: int) -> None:
        if not frame():
            raise PickleError("memo put with an empty stack")
        if index == len(memo):
            memo.append(stack[-1])
        elif 0 <= index < len(memo):
            memo[index] = stack[-1]
        else:
            raise PickleError(f"memo index {index} is beyond the {len(memo)} entries so far "
                              "(a pickler numbers them in order)")

    def get(index: int) -> None:
        if not 0 <= index < len(memo):
            raise PickleError(f"memo index {index} was never stored ({len(memo)} entries)")
        push(memo[index])

    while True:
        if r.pos >= r.end:
            raise PickleError("the pickle ends before its STOP opcode (truncated)")
        op = buf[r.pos]
        r.pos += 1
        ops += 1
        if ops > max_ops:
            raise PickleError(f"over {max_ops} opcodes (each memo get or DUP repeats a value)")
        if op == 0x6a:  # LONG_BINGET
            at = r.pos
            if at + 4 > r.end:
                take(4)
            index = _UNPACK_L(buf, at)[0]
            r.pos = at + 4
            if index >= len(memo):
                get(index)
            push(memo[index])
            continue
        if op == 0x68:  # BINGET
            if r.pos >= r.end:
                take(1)
            index = buf[r.pos]
            r.pos += 1
            if index >= len(memo):
                get(index)
            push(memo[index])
            continue
        if op == 0x94:  # MEMOIZE
            put(len(memo))
            continue
        if op == 0x28:  # MARK
            if len(marks) >= max_marks:
                raise PickleError(f"nested too deeply: over {max_marks} open MARKs")
            marks.append(len(stack))
            continue
        if op in _BUILDS:
            objects += 1
            if objects > max_objects:
                raise PickleError(f"over {max_objects} objects (numbers, strings, containers)")
        if op == 0x8a:  # LONG1
            push(int.from_bytes(take(take(1)[0]), "little", signed=True))
        elif op == 0x4b:  # BININT1
            push(take(1)[0])
        elif op == 0x7d:  # EMPTY_DICT
            push({})
        elif op == 0x75:  # SETITEMS
            items = pop_mark()
            if not frame() or not isinstance(stack[-1], dict) or len(items) % 2:
                raise PickleError("SETITEMS without a dict or with an odd number of items")
            target = stack[-1]
            for i in range(0, len(items), 2):
                target[_key(items[i])] = items[i + 1]
        elif op == 0x8c:  # SHORT_BINUNICODE
            push(str(take(take(1)[0]), "utf-8", "surrogatepass"))
        elif op == 0x4a:  # BININT
            push(_UNPACK_I(take(4))[0])
        elif op == 0x5d:  # EMPTY_LIST
            push([])
        elif op == 0x65:  # APPENDS
            items = pop_mark()
            if not frame() or not isinstance(stack[-1], list):
                raise PickleError("APPENDS without a list")
            stack[-1].extend(items)
        elif op == 0x4d:  # BININT2
            push(_UNPACK_H(take(2))[0])
        elif op in (0x88, 0x89):  # NEWTRUE, NEWFALSE
            push(op == 0x88)
        elif op in (0x85, 0x86, 0x87):  # TUPLE1-3
            n = op - 0x84
            if frame() < n:
                raise PickleError("TUPLE with too few items on the stack")
            items = stack[-n:]
            del stack[-n:]
            push(tuple(items))
        elif op == 0x61:  # APPEND
            if frame() < 2 or not isinstance(stack[-2], list):
                raise PickleError("APPEND without a list")
            value = stack.pop()
            stack[-1].append(value)
        elif op == 0x58:  # BINUNICODE
            push(str(take(_UNPACK_L(take(4))[0]), "utf-8", "surrogatepass"))
        elif op == 0x8d:  # BINUNICODE8
            push(str(take(_UNPACK_Q(take(8))[0]), "utf-8", "surrogatepass"))
        elif op == 0x47:  # BINFLOAT
            push(struct.unpack(">d", take(8))[0])
        elif op == 0x95:  # FRAME: the length of the opcodes that follow, which must be there
            if _UNPACK_Q(take(8))[0] > r.end - r.pos:
                raise PickleError(f"a frame at offset {r.pos - 9} runs past the end of the data")
        elif op == 0x80:  # PROTO
            if take(1)[0] > 5:
                raise PickleError("unsupported pickle protocol (over 5)")
        elif op == 0x2e:  # STOP
            if len(stack) != 1 or marks:
                raise PickleError("STOP with a malformed stack")
            r.objects = objects
            return stack[0]
        elif op == 0x4e:  # NONE
            push(None)
        elif op == 0x29:  # EMPTY_TUPLE
            push(())
        elif op == 0x74:  # TUPLE
            push(tuple(pop_mark()))
        elif op == 0x6c:  # LIST
            push(pop_mark())
        elif op == 0x64:  # DICT
            items = pop_mark()
            if len(items) % 2:
                raise PickleError("DICT with an odd number of items")
            push({_key(items[i]): items[i + 1] for i in range(0, len(items), 2)})
        elif op == 0x73:  # SETITEM
            if frame() < 3 or not isinstance(stack[-3], dict):
                raise PickleError("SETITEM without a dict")
            value, key = stack.pop(), stack.pop()
            stack[-1][_key(key)] = value
        elif op == 0x8f:  # EMPTY_SET
            push(set())
        elif op == 0x90:  # ADDITEMS
            items = pop_mark()
            if not frame() or not isinstance(stack[-1], set):
                raise PickleError("ADDITEMS without a set")
            stack[-1].update(_key(v) for v in items)
        elif op == 0x91:  # FROZENSET
            push(frozenset(_key(v) for v in pop_mark()))
        elif op == 0x8b:  # LONG4
            n = _length4(take(4))
            if n > limits.max_int_bytes:
                raise PickleError(f"an integer of {n} bytes (over {limits.max_int_bytes})")
            push(int.from_bytes(take(n), "little", signed=True))
        elif op == 0x71:  # BINPUT
            put(take(1)[0])
        elif op == 0x72:  # LONG_BINPUT
            put(_UNPACK_L(take(4))[0])
        elif op == 0x70:  # PUT (text)
            put(int(line()))
        elif op == 0x67:  # GET (text)
            get(int(line()))
        elif op == 0x32:  # DUP
            if not frame():
                raise PickleError("DUP with an empty stack")
            push(stack[-1])
        elif op == 0x30:  # POP
            if frame():
                stack.pop()
            elif marks:
                pop_mark()
            else:
                raise PickleError("POP with an empty stack")
        elif op == 0x31:  # POP_MARK
            pop_mark()
        elif op == 0x42:  # BINBYTES
            push(bytes(take(_UNPACK_L(take(4))[0])))
        elif op == 0x43:  # SHORT_BINBYTES
            push(bytes(take(take(1)[0])))
        elif op == 0x8e:  # BINBYTES8
            push(bytes(take(_UNPACK_Q(take(8))[0])))
        elif op == 0x96:  # BYTEARRAY8
            push(bytearray(take(_UNPACK_Q(take(8))[0])))
        elif op == 0x54:  # BINSTRING
            push(str(take(_length4(take(4))), "ascii"))
        elif op == 0x55:  # SHORT_BINSTRING
            push(str(take(take(1)[0]), "ascii"))
        elif op == 0x49:  # INT (text; 00 and 01 are False and True)
            text = line()
            push(False if text == b"00" else True if text == b"01" else _text_int(text))
        elif op == 0x4c:  # LONG (text)
            push(_text_int(line().rstrip(b"L")))
        elif op == 0x46:  # FLOAT (text)
            push(float(line()))
        elif op == 0x56:  # UNICODE (text, raw-unicode-escape)
            push(line().decode("raw-unicode-escape"))
        elif op == 0x53:  # STRING (text, quoted)
            push(_text_string(line()))
        elif op in (0x63, 0x69):  # GLOBAL, INST
            module = line().decode("utf-8", "replace")
            raise refuse_global(module, line().decode("utf-8", "replace"))
        elif op == 0x93:  # STACK_GLOBAL
            name = stack[-1] if stack else "?"
            module = stack[-2] if len(stack) > 1 else "?"
            raise refuse_global(module, name)
        elif op in (0x50, 0x51):  # PERSID, BINPERSID
            raise PickleRefused("refused: the pickle holds a persistent reference, which a "
                                "memory snapshot never does (nothing from the file was run)")
        elif op in _REFUSED:
            raise PickleRefused(f"refused: the pickle calls or builds an object ({_REFUSED[op]}"
                                f" opcode); {_CODE}")
        else:
            raise PickleError(f"unknown pickle opcode 0x{op:02x} at offset {r.pos - 1}")


def _length4(view: memoryview) -> int:
    n = struct.unpack("<i", view)[0]
    if n < 0:
        raise PickleError(f"a negative length ({n})")
    return n


def _text_int(text: bytes) -> int:
    if len(text) > _MAX_DIGITS:
        raise PickleError(f"a text integer of {len(text)} digits (over {_MAX_DIGITS})")
    return int(text)


def _text_string(text: bytes) -> str:
    if len(text) < 2 or text[:1] not in (b"'", b'"') or text[-1:] != text[:1]:
        raise PickleError("a STRING argument that is not quoted")
    return text[1:-1].decode("unicode-escape").encode("latin-1").decode("ascii")
