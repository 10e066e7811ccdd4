"""A pickle interpreter that builds only data: the restricted machine under framework.weights.pth.

It knows the opcodes torch.save's pickles use (protocols 2-5: containers, numbers, strings, the
memo, GLOBAL / STACK_GLOBAL, REDUCE, BUILD, BINPERSID) and no others. Names resolve only through
the `allowed` table the caller passes, to the caller's own objects; REDUCE calls only a `Func` from
that table; BUILD only sets the state of an `ODict` (an OrderedDict the caller built), and the state
is dropped. `scan()` checks every opcode and name of a pickle before `run()` builds anything.

Bounds: nesting depth, stack frame size, open MARKs and memo entries; every string and length is
checked against the bytes at hand. Containers are tracked by id: once one is put inside another it
is frozen (torch's pickles fill a container before using it), which makes reference cycles
impossible and the depth of every container exact.
"""
from __future__ import annotations

import struct

from .errors import CheckpointError

MAX_DEPTH = 64               # container nesting (a state_dict is 2-3 deep, a training state ~6)
MAX_STACK = 10_000           # objects in one stack frame (torch batches 1000 pairs per SETITEMS)
MAX_MARKS = 4 * MAX_DEPTH    # open MARKs
MAX_MEMO = 1_000_000         # memo entries
MAX_NAME = 256               # bytes in a GLOBAL module or attribute name

# every pickle opcode by name (for messages), then the supported ones with their argument
_NAMES = dict(zip(
    b"(.012FIJKLMNPQRSTUVXabc}deghij]lopqrst)uGBC",
    "MARK STOP POP POP_MARK DUP FLOAT INT BININT BININT1 LONG BININT2 NONE PERSID BINPERSID REDUCE "
    "STRING BINSTRING SHORT_BINSTRING UNICODE BINUNICODE APPEND BUILD GLOBAL EMPTY_DICT DICT "
    "APPENDS GET BINGET INST LONG_BINGET EMPTY_LIST LIST OBJ PUT BINPUT LONG_BINPUT SETITEM TUPLE "
    "EMPTY_TUPLE SETITEMS BINFLOAT BINBYTES SHORT_BINBYTES".split()))
_NAMES.update(zip(range(0x80, 0x99), (
    "PROTO NEWOBJ EXT1 EXT2 EXT4 TUPLE1 TUPLE2 TUPLE3 NEWTRUE NEWFALSE LONG1 LONG4 "
    "SHORT_BINUNICODE BINUNICODE8 BINBYTES8 EMPTY_SET ADDITEMS FROZENSET NEWOBJ_EX STACK_GLOBAL "
    "MEMOIZE FRAME "
    "BYTEARRAY8 NEXT_BUFFER READONLY_BUFFER").split()))
# argument: a struct format, "lines" (GLOBAL), or a length-prefixed kind: the length is 1 byte for
# kinds ending in 1 and for "long", else 4; "text" is UTF-8, "str" a Python 2 str, "bytes" raw
_ARGS = {
    "PROTO": "<B", "FRAME": "<Q", "BINPUT": "<B", "LONG_BINPUT": "<I", "BINGET": "<B",
    "LONG_BINGET": "<I", "BININT": "<i", "BININT1": "<B", "BININT2": "<H", "BINFLOAT": ">d",
    "LONG1": "long", "BINUNICODE": "text4", "SHORT_BINUNICODE": "text1", "BINSTRING": "str4",
    "SHORT_BINSTRING": "str1", "BINBYTES": "bytes4", "SHORT_BINBYTES": "bytes1", "GLOBAL": "lines",
}
_NO_ARG = ("STOP MARK EMPTY_DICT EMPTY_LIST EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 SETITEM "
           "SETITEMS APPEND APPENDS MEMOIZE NONE NEWTRUE NEWFALSE STACK_GLOBAL REDUCE BUILD "
           "BINPERSID").split()
_MEMO_OPS = ("BINPUT", "LONG_BINPUT", "MEMOIZE")


def _decoder(name):
    """(name, kind, unpack, width) for one supported opcode; kind "fixed" is a struct format."""
    kind = _ARGS.get(name)
    if kind and kind[0] in "<>":
        fmt = struct.Struct(kind)
        return name, "fixed", fmt.unpack_from, fmt.size
    return name, kind, None, (1 if kind and kind[-1] in "1g" else 4)


_DECODERS = {code: _decoder(name) for code, name in _NAMES.items()
             if name in _ARGS or name in _NO_ARG}
def refuse(source, what):
    raise CheckpointError(f"refusing to load {source}: {what}")


def short(value, limit=80) -> str:
    """Something from the file, fit for a one-line message: escaped, bounded."""
    text = str(value).encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit] + "..."


class Func:
    """An allowed callable: REDUCE runs `fn(machine, args)` (the caller's own code)."""
    __slots__ = ("name", "fn")

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __repr__(self):
        return self.name


class ODict(dict):
    """A collections.OrderedDict built by the caller: the only object BUILD accepts."""


class PickleMachine:
    """One pickle in `data` (bytes or memoryview) from offset `start` to its STOP; `end` is the
    offset after STOP once scanned. `allowed`: dotted name -> the object GLOBAL pushes.
    `persistent_load(machine, pid)` resolves BINPERSID (None: refused)."""

    def __init__(self, source, data, allowed, start=0, persistent_load=None):
        self.source, self.data, self.allowed = source, memoryview(data), allowed
        self.start, self.end, self.persistent_load = start, None, persistent_load

    def fail(self, what):
        refuse(self.source, what)

    def _truncated(self):
        raise CheckpointError(f"{self.source} is truncated: a pickle in it breaks off at byte "
                              f"{len(self.data)} (an interrupted download or copy?)")

    # -- decoding ----------------------------------------------------------------------------------
    def ops(self):
        """Yield (opcode name, argument) up to and including STOP."""
        data, pos, size, decoders = self.data, self.start, len(self.data), _DECODERS
        while True:
            if pos >= size:
                self._truncated()
            code = data[pos]
            if code not in decoders:
                self.fail(f"it uses pickle opcode {_NAMES[code]}, which a weights file never needs"
                          if code in _NAMES else
                          f"byte 0x{code:02x} at offset {pos} is no pickle opcode (corrupt?)")
            name, kind, unpack, width = decoders[code]
            pos += 1
            arg = None
            if kind == "fixed":
                if pos + width > size:
                    self._truncated()
                arg, pos = unpack(data, pos)[0], pos + width
            elif kind == "lines":
                module, pos = self._line(pos)
                attr, pos = self._line(pos)
                arg = (module, attr)
            elif kind:
                if pos + width > size:
                    self._truncated()
                n = int.from_bytes(data[pos:pos + width], "little", signed=kind == "str4")
                pos += width
                if n < 0:
                    self.fail("a string of negative length")
                if pos + n > size:
                    self._truncated()
                arg, pos = self._decode(kind, bytes(data[pos:pos + n])), pos + n
            yield name, arg
            if name == "STOP":
                self.end = pos
                return

    def _line(self, pos):
        stop = bytes(self.data[pos:pos + MAX_NAME + 1]).find(b"\n")
        if stop < 0 and pos + MAX_NAME + 1 > len(self.data):
            self._truncated()
        if stop < 0:
            self.fail(f"a GLOBAL name longer than {MAX_NAME} bytes")
        return bytes(self.data[pos:pos + stop]).decode("utf-8", "replace"), pos + stop + 1

    def _decode(self, kind, raw):
        if kind == "long":
            return int.from_bytes(raw, "little", signed=True)
        if kind.startswith("bytes"):
            return raw
        try:  # a Python 2 str ("str"): UTF-8 as torch.load decodes it, else kept as bytes
            return raw.decode("utf-8", "surrogatepass" if kind.startswith("text") else "strict")
        except UnicodeDecodeError:
            if kind.startswith("text"):
                self.fail("a string that is not UTF-8")
            return raw

    def resolve(self, module, name):
        full = f"{module}.{name}"
        if full not in self.allowed:
            self.fail(f"it references {short(full)}, which a weights file never needs")
        return self.allowed[full]

    # -- pass 1: check, build nothing --------------------------------------------------------------
    def scan(self) -> int:
        """Check every opcode and name up to STOP; returns the offset after it. STACK_GLOBAL takes
        its names from the stack, so they must be the two strings pushed just before it (literally
        or from the memo), which is how pickle writes it."""
        recent: list = []   # statically known values of the latest pushes
        strings: dict = {}  # memo index -> the string stored there
        memoized = 0        # MEMOIZE count: its next index (pickle never mixes it with BINPUT)
        kinds = set()
        for name, arg in self.ops():
            if name == "PROTO" and not 2 <= arg <= 5:
                self.fail(f"pickle protocol {arg}")
            elif name == "GLOBAL":
                self.resolve(*arg)
            elif name == "STACK_GLOBAL":
                if len(recent) < 2 or not all(isinstance(v, str) for v in recent[-2:]):
                    self.fail("it uses STACK_GLOBAL on names computed while loading")
                self.resolve(*recent[-2:])
            if name in _MEMO_OPS:
                kinds.add(name == "MEMOIZE")
                if len(kinds) > 1:
                    self.fail("a pickle that mixes MEMOIZE with BINPUT")
                index, memoized = (memoized, memoized + 1) if name == "MEMOIZE" else (arg, memoized)
                if memoized > MAX_MEMO:
                    self.fail(f"more than {MAX_MEMO} memo entries")
                if recent and isinstance(recent[-1], str):
                    strings[index] = recent[-1]
                else:
                    strings.pop(index, None)
            elif name in ("BINGET", "LONG_BINGET"):
                recent = (recent + [strings.get(arg)])[-2:]
            elif isinstance(arg, str):
                recent = (recent + [arg])[-2:]
            elif name != "FRAME":
                recent = []
        return self.end

    # -- pass 2: build -----------------------------------------------------------------------------
    def run(self):
        """Build and return the object (call scan() first)."""
        self.stack, self.metastack, self.memo = [], [], {}
        self._depth: dict[int, int] = {}  # id -> nesting depth of every container built
        self._frozen: set[int] = set()    # ids of containers already inside another
        self._alive: list = []            # keeps those containers alive, so ids stay unique
        push, pop = self.push, self.pop
        do = {
            "MARK": self._mark, "EMPTY_DICT": lambda: push(self.new({})),
            "EMPTY_LIST": lambda: push(self.new([])), "EMPTY_TUPLE": lambda: push(self.tuple([])),
            "TUPLE": lambda: push(self.tuple(self.pop_mark())),
            "TUPLE1": lambda: push(self.tuple(self._pop_n(1))),
            "TUPLE2": lambda: push(self.tuple(self._pop_n(2))),
            "TUPLE3": lambda: push(self.tuple(self._pop_n(3))),
            "SETITEM": lambda: self._setitems(self._pop_n(2)),
            "SETITEMS": lambda: self._setitems(self.pop_mark()),
            "APPEND": lambda: self._appends(self._pop_n(1)),
            "APPENDS": lambda: self._appends(self.pop_mark()),
            "NONE": lambda: push(None), "NEWTRUE": lambda: push(True),
            "NEWFALSE": lambda: push(False), "STACK_GLOBAL": self._stack_global,
            "REDUCE": self._reduce, "BUILD": self._build, "BINPERSID": self._persistent,
            "MEMOIZE": lambda: self._put(len(self.memo)),
        }
        for name, arg in self.ops():
            if name in do:
                do[name]()
            elif name in _MEMO_OPS:
                self._put(arg)
            elif name in ("BINGET", "LONG_BINGET"):
                if arg not in self.memo:
                    self.fail(f"memo entry {arg} is read before it is written")
                push(self.memo[arg])
            elif name == "GLOBAL":
                push(self.resolve(*arg))
            elif name == "STOP":
                if self.metastack or len(self.stack) != 1:
                    self.fail("a pickle that stops with a MARK open or several objects left")
                return pop()
            elif name not in ("PROTO", "FRAME"):  # numbers and strings
                push(arg)
        raise AssertionError("ops() ends with STOP")

    def push(self, value):
        if len(self.stack) >= MAX_STACK:
            self.fail(f"more than {MAX_STACK} objects on the pickle stack")
        self.stack.append(value)

    def pop(self):
        if not self.stack:
            self.fail("a pickle opcode without enough arguments on the stack")
        return self.stack.pop()

    def _pop_n(self, n):
        return [self.pop() for _ in range(n)][::-1]

    def _top(self):
        if not self.stack:
            self.fail("a pickle opcode without enough arguments on the stack")
        return self.stack[-1]

    def pop_mark(self) -> list:
        if not self.metastack:
            self.fail("a pickle opcode that needs a MARK without one")
        items, self.stack = self.stack, self.metastack.pop()
        return items

    def _mark(self):
        if len(self.metastack) >= MAX_MARKS:
            self.fail(f"more than {MAX_MARKS} nested MARKs")
        self.metastack.append(self.stack)
        self.stack = []

    def _put(self, index):
        self.memo[index] = self._top()
        if len(self.memo) > MAX_MEMO:
            self.fail(f"more than {MAX_MEMO} memo entries")

    # -- containers: depth and freezing ------------------------------------------------------------
    def new(self, container):
        """Track a fresh, empty dict or list (callables building one use this)."""
        self._alive.append(container)
        self._depth[id(container)] = 1
        return container

    def _adopt(self, parent, child) -> int:
        """Freeze `child` (now inside `parent`); returns the depth it gives its parent."""
        if child is parent:
            self.fail("a container that contains itself")
        if id(child) not in self._depth:
            return 1
        self._frozen.add(id(child))
        return self._depth[id(child)] + 1

    def _grow(self, parent, child):
        depth = self._adopt(parent, child)
        if depth > MAX_DEPTH:
            self.fail(f"containers nested more than {MAX_DEPTH} levels deep")
        self._depth[id(parent)] = max(self._depth[id(parent)], depth)

    def _check_target(self, target, kind, op):
        if not isinstance(target, kind) or id(target) not in self._depth:
            self.fail(f"{op} on a {type(target).__name__}")
        if id(target) in self._frozen:
            self.fail(f"{op} on a container already in use (a reference cycle?)")

    def setitem(self, target, key, value):
        self._check_target(target, dict, "SETITEM")
        if not isinstance(key, (str, int, float, bytes, type(None))):
            self.fail(f"a dict key of type {type(key).__name__}")
        self._grow(target, value)
        target[key] = value

    def _setitems(self, items):
        if len(items) % 2:
            self.fail("SETITEMS with an odd number of items")
        target = self._top()
        for i in range(0, len(items), 2):
            self.setitem(target, items[i], items[i + 1])

    def _appends(self, items):
        target = self._top()
        self._check_target(target, list, "APPEND")
        for item in items:
            self._grow(target, item)
        target.extend(items)

    def tuple(self, items):
        out = tuple(items)
        depth = max((self._adopt(out, x) for x in items), default=0) + 1
        if depth > MAX_DEPTH:
            self.fail(f"containers nested more than {MAX_DEPTH} levels deep")
        self._alive.append(out)
        self._depth[id(out)] = depth
        self._frozen.add(id(out))
        return out

    # -- the opcodes that reach the caller's objects -----------------------------------------------
    def _stack_global(self):
        name, module = self.pop(), self.pop()
        if not (isinstance(module, str) and isinstance(name, str)):
            self.fail("STACK_GLOBAL on something other than two strings")
        self.push(self.resolve(module, name))

    def _reduce(self):
        args, func = self.pop(), self.pop()
        if not isinstance(func, Func):
            self.fail(f"it calls {short(getattr(func, 'name', type(func).__name__))}, which is "
                      f"not a function it may call")
        if not isinstance(args, tuple):
            self.fail(f"{func.name} called with a {type(args).__name__} of arguments")
        self.push(func.fn(self, args))

    def _build(self):
        self.pop()  # the state, e.g. state_dict()'s _metadata: not needed, never applied
        self._check_target(self._top(), ODict, "BUILD (setting an object's state)")

    def _persistent(self):
        pid = self.pop()
        if self.persistent_load is None:
            self.fail("a storage reference outside the object pickle")
        self.push(self.persistent_load(self, pid))
