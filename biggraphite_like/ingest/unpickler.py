"""A bounded, restricted unpickler for what carbon's senders and graphite-web send.

pickle's own Unpickler builds whatever the opcodes say before anyone can look at it: a
200-byte frame can reference one list from another 26 times over (a "billion laughs"
whose expansion has 2^26 elements), nest lists 100,000 deep, announce a memo slot of index
2^31 (the C unpickler then allocates and clears a 16 GiB memo), or fill a set or dict
with colliding keys. This one interprets the opcodes itself (pure Python, protocols 0 to
5, only the opcodes of lists, tuples, small dicts, strings, bytes, numbers, None and
booleans) and refuses the frame, before building anything more, as soon as:

- a container would nest deeper than `max_depth`;
- the frame would expand to more than `max_elements` elements, where every object built
  counts 1 and every memo reference (GET) or DUP counts the whole size of what it refers
  to (without references a pickle builds at most one object per byte: the default bound
  is the frame's length plus SLACK);
- a container would be changed after something else refers to it (what makes cycles and
  under-counted references possible; pickle's writers never do it);
- a dict would hold more than `max_dict` items (MAX_DICT unless told: keys are hashed,
  and integers can be chosen to collide), or a text number more than MAX_DIGITS digits.

Globals are refused as carbon's SafeUnpickler refuses them: only `copy_reg._reconstructor`
and `__builtin__.object` may be loaded, and only to build a bare object. Strings that are
not UTF-8 stay bytes (the caller refuses them with a reason) rather than failing the frame.

Every refusal is a `PickleRefused` whose message is short and never shows a hostile object.
"""
from __future__ import annotations

import codecs
import copyreg
import pickle
import struct

from biggraphite_like.errors import BglError

MAX_DEPTH = 8  # carbon's messages need 3 (list, point tuple, (timestamp, value) tuple)
SLACK = 64  # elements any frame may expand to beyond its length in bytes
MAX_DICT = 64  # items of one dict (CarbonLink's requests have 2 to 4)
MAX_DIGITS = 400  # digits of a protocol-0 text number (a float needs 17, an int64 19)

# carbon.util.SafeUnpickler.PICKLE_SAFE: module -> names a pickle may load
PICKLE_SAFE = {"copy_reg": {"_reconstructor"}, "__builtin__": {"object"}}
_SAFE_OBJECTS = {("copy_reg", "_reconstructor"): copyreg._reconstructor, ("__builtin__", "object"): object}

_SCALARS = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (list, tuple, dict)
_U8, _U16, _I32, _U32, _U64 = (struct.Struct(f).unpack_from for f in ("<B", "<H", "<i", "<I", "<Q"))
_F64 = struct.Struct(">d").unpack_from


class PickleRefused(BglError, pickle.UnpicklingError):
    """A pickle this unpickler will not build: the message says why, briefly."""


class _Info:
    """What the unpickler knows about a container it built: its size once expanded, its
    depth, whether something refers to it (then it may not change any more)."""

    __slots__ = ("size", "depth", "referenced")

    def __init__(self) -> None:
        self.size, self.depth, self.referenced = 1, 1, False


def restricted_loads(data: bytes, max_depth: int = MAX_DEPTH, max_elements: int | None = None,
                     max_dict: int = MAX_DICT) -> object:
    """The object pickled in `data`, or PickleRefused saying why not (see the module doc)."""
    machine = _Machine(bytes(data), max_depth, len(data) + SLACK if max_elements is None else max_elements,
                       max_dict)
    try:
        return machine.run()
    except PickleRefused:
        raise
    except (IndexError, struct.error, ValueError, TypeError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise PickleRefused(f"malformed pickle near byte {machine.pos}: {type(exc).__name__}") from None


class _Machine:
    def __init__(self, data: bytes, max_depth: int, max_elements: int, max_dict: int):
        self.data = data
        self.max_dict = max_dict
        self.pos = 0
        self.max_depth = max_depth
        self.max_elements = max_elements
        self.elements = 0
        self.stack: list = []
        self.marks: list[int] = []
        self.memo: dict[int, object] = {}
        self.info: dict[int, _Info] = {}  # id(container) -> _Info
        self.keep: list = []  # every container built, alive, so that no id is reused
        self.dispatch = {ord(op): handler for op, handler in self._handlers().items()}

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> object:
        data, dispatch = self.data, self.dispatch
        end = len(data)
        while self.pos < end:
            op = data[self.pos]
            self.pos += 1
            handler = dispatch.get(op)
            if handler is None:
                name = _OPCODE_NAMES.get(op, f"0x{op:02x}")
                raise PickleRefused(f"pickle opcode {name} at byte {self.pos - 1} is not accepted"
                                    " (only lists, tuples, small dicts, strings and numbers are)")
            if handler() is _STOP:
                if not self.stack:
                    raise PickleRefused("empty pickle")
                return self.stack[-1]
        raise PickleRefused("truncated pickle: no STOP opcode")

    # -- accounting ----------------------------------------------------------------------
    def _count(self, elements: int) -> None:
        self.elements += elements
        if self.elements > self.max_elements:
            raise PickleRefused(f"pickle of {len(self.data)} bytes expands to more than {self.max_elements}"
                                " elements (memo references to big objects: refused before building them)")

    def _size(self, obj: object) -> int:
        return self.info[id(obj)].size if type(obj) in _CONTAINERS else 1

    def _new(self, container):
        self._count(1)
        self.info[id(container)] = _Info()
        self.keep.append(container)
        return container

    def _adopt(self, container, items) -> None:
        """Account for `items` going into `container` (new, or not referenced yet)."""
        info = self.info[id(container)]
        if info.referenced:
            raise PickleRefused("pickle changes a list or dict after referring to it (a cycle or a hidden"
                                " expansion): refused")
        for item in items:
            if type(item) in _CONTAINERS:  # (the container itself could only come by a reference: refused above)
                child = self.info[id(item)]
                child.referenced = True
                info.size += child.size
                if child.depth + 1 > info.depth:
                    info.depth = child.depth + 1
                    if info.depth > self.max_depth:
                        raise PickleRefused(f"pickle nests containers deeper than {self.max_depth} levels: refused")
            else:
                info.size += 1

    def _push_reference(self, obj) -> None:
        self._count(self._size(obj))
        if type(obj) in _CONTAINERS:
            self.info[id(obj)].referenced = True
        self.stack.append(obj)

    def _push(self, obj) -> None:
        self._count(1)
        self.stack.append(obj)

    # -- arguments -----------------------------------------------------------------------
    def _take(self, size: int) -> bytes:
        start = self.pos
        if size < 0 or start + size > len(self.data):
            raise PickleRefused(f"truncated pickle: an argument of {size} bytes at byte {start} passes its end")
        self.pos = start + size
        return self.data[start:self.pos]

    def _line(self) -> bytes:
        end = self.data.index(b"\n", self.pos)
        line = self.data[self.pos:end]
        self.pos = end + 1
        return line

    def _number_text(self) -> bytes:
        line = self._line()
        if len(line) > MAX_DIGITS:
            raise PickleRefused(f"pickle holds a number of {len(line)} characters (at most {MAX_DIGITS})")
        return line

    def _pop_mark(self) -> list:
        if not self.marks:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: no MARK")
        mark = self.marks.pop()
        items = self.stack[mark:]
        del self.stack[mark:]
        return items

    def _memo_index(self, index: int) -> int:
        if index > self.max_elements:  # no real pickle has more memo slots than elements
            raise PickleRefused(f"pickle memo index {index} is over the frame's bound ({self.max_elements})")
        return index

    # -- opcodes -------------------------------------------------------------------------
    def _handlers(self) -> dict:
        take, push, u = self._take, self._push, self._text
        return {
            "\x80": lambda: take(1) and None,  # PROTO
            "\x95": lambda: take(8) and None,  # FRAME
            ".": lambda: _STOP,
            "(": lambda: self.marks.append(len(self.stack)),
            "0": lambda: self.stack.pop(),
            "1": self._pop_mark,
            "2": lambda: self._push_reference(self.stack[-1]),
            "N": lambda: push(None),
            "\x88": lambda: push(True),
            "\x89": lambda: push(False),
            "I": self._int_text,
            "J": lambda: push(_I32(take(4))[0]),
            "K": lambda: push(take(1)[0]),
            "M": lambda: push(_U16(take(2))[0]),
            "L": lambda: push(int(self._number_text().rstrip(b"L"), 0)),
            "\x8a": lambda: push(int.from_bytes(take(take(1)[0]), "little", signed=True)),
            "\x8b": lambda: push(int.from_bytes(take(_I32(take(4))[0]), "little", signed=True)),
            "F": lambda: push(float(self._number_text())),
            "G": lambda: push(_F64(take(8))[0]),
            "S": lambda: push(u(codecs.escape_decode(_unquote(self._line()))[0])),
            "T": lambda: push(u(take(_I32(take(4))[0]))),
            "U": lambda: push(u(take(take(1)[0]))),
            "V": lambda: push(self._line().decode("raw-unicode-escape")),
            "X": lambda: push(u(take(_U32(take(4))[0]))),
            "\x8c": lambda: push(u(take(take(1)[0]))),
            "\x8d": lambda: push(u(take(_U64(take(8))[0]))),
            "B": lambda: push(take(_U32(take(4))[0])),
            "C": lambda: push(take(take(1)[0])),
            "\x8e": lambda: push(take(_U64(take(8))[0])),
            "]": lambda: self.stack.append(self._new([])),
            ")": lambda: self._finish((), []),
            "}": lambda: self.stack.append(self._new({})),
            "l": lambda: self._build_from_mark(list),
            "t": lambda: self._build_from_mark(tuple),
            "\x85": lambda: self._tuple(1),
            "\x86": lambda: self._tuple(2),
            "\x87": lambda: self._tuple(3),
            "a": lambda: self._append(self.stack.pop() if len(self.stack) > 1 else None, single=True),
            "e": lambda: self._append(self._pop_mark()),
            "d": self._dict_from_mark,
            "s": lambda: self._set_items(self.stack[-3], [self.stack.pop(-2), self.stack.pop()]),
            "u": self._set_items_from_mark,
            "p": lambda: self._put(int(self._number_text())),
            "q": lambda: self._put(take(1)[0]),
            "r": lambda: self._put(_U32(take(4))[0]),
            "\x94": lambda: self._put(len(self.memo)),
            "g": lambda: self._get(int(self._number_text())),
            "h": lambda: self._get(take(1)[0]),
            "j": lambda: self._get(_U32(take(4))[0]),
            "c": lambda: self._global(self._line().decode("ascii"), self._line().decode("ascii")),
            "\x93": lambda: self._global(*self._pop_two_strings()),
            "R": self._reduce,
            "\x81": self._newobj,
        }

    @staticmethod
    def _text(raw: bytes) -> str | bytes:
        """A pickled string as carbon's unpickler (encoding='utf-8') gives it; bytes when not UTF-8."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw

    def _int_text(self) -> None:
        text = self._number_text()
        self._push(_BOOLEANS[text] if text in _BOOLEANS else int(text, 0))

    def _tuple(self, count: int) -> None:
        if len(self.stack) < count:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: a tuple of {count} on a shorter stack")
        items = self.stack[len(self.stack) - count:]
        del self.stack[len(self.stack) - count:]
        self._finish(tuple(items), items)

    def _build_from_mark(self, kind) -> None:
        items = self._pop_mark()
        self._finish(kind(items), items)

    def _finish(self, container, items) -> None:
        self._new(container)
        self._adopt(container, items)
        self.stack.append(container)

    def _append(self, items, single: bool = False) -> None:
        if single:
            if items is None:
                raise PickleRefused(f"malformed pickle near byte {self.pos}: APPEND on a short stack")
            items = [items]
        target = self.stack[-1]
        if type(target) is not list:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: appending to a {type(target).__name__}")
        self._adopt(target, items)
        target.extend(items)

    def _dict_from_mark(self) -> None:
        items = self._pop_mark()
        container = self._new({})
        self._set_items(container, items)
        self.stack.append(container)

    def _set_items_from_mark(self) -> None:
        items = self._pop_mark()
        self._set_items(self.stack[-1], items)

    def _set_items(self, target, items: list) -> None:
        if type(target) is not dict or len(items) % 2:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: dict items without a dict")
        keys = items[0::2]
        if not all(type(key) in _SCALARS for key in keys):
            raise PickleRefused("pickle has a dict key that is not a string or a number: refused")
        if len(target) + len(keys) > self.max_dict:
            raise PickleRefused(f"pickle has a dict of more than {self.max_dict} items: refused")
        self._adopt(target, items)
        target.update(zip(keys, items[1::2]))

    def _put(self, index: int) -> None:
        if not self.stack:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: memo put on an empty stack")
        self.memo[self._memo_index(index)] = self.stack[-1]

    def _get(self, index: int) -> None:
        try:
            obj = self.memo[index]
        except KeyError:
            raise PickleRefused(f"malformed pickle near byte {self.pos}: memo slot {index} is empty") from None
        self._push_reference(obj)

    def _pop_two_strings(self) -> tuple[str, str]:
        name, module = self.stack.pop(), self.stack.pop()
        if type(module) is not str or type(name) is not str:
            raise PickleRefused("pickle loads a global whose name is not a string: refused")
        return module, name

    def _global(self, module: str, name: str) -> None:
        if module not in PICKLE_SAFE:
            raise PickleRefused(f"Attempting to unpickle unsafe module {module[:80]}")
        if name not in PICKLE_SAFE[module]:
            raise PickleRefused(f"Attempting to unpickle unsafe class {name[:80]}")
        self._push(_SAFE_OBJECTS[(module, name)])

    def _reduce(self) -> None:
        args, func = self.stack.pop(), self.stack.pop()
        if func is object and args == ():
            self._push(object())
        elif func is copyreg._reconstructor and args == (object, object, None):
            self._push(object())
        else:
            raise PickleRefused("pickle calls something other than object(): refused")

    def _newobj(self) -> None:
        args, cls = self.stack.pop(), self.stack.pop()
        if cls is not object or args != ():
            raise PickleRefused("pickle builds an object other than object(): refused")
        self._push(object())


_STOP = object()
_BOOLEANS = {b"00": False, b"01": True}  # protocol 0's INT spelling of booleans
_OPCODE_NAMES = {op.code.encode("latin-1")[0]: op.name for op in __import__("pickletools").opcodes}


def _unquote(line: bytes) -> bytes:
    """The body of a protocol-0 STRING argument ('...' or "...")."""
    if len(line) >= 2 and line[0] == line[-1] and line[:1] in (b"'", b'"'):
        return line[1:-1]
    raise PickleRefused("malformed pickle: a STRING argument is not quoted")
