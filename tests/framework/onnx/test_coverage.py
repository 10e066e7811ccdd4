"""Every Function of framework.functional (walked, not listed) has an ONNX converter or is in
framework.onnx.ops.NOT_EXPORTABLE with its reason: a new op cannot be left out of export
silently, and a listed one must really lack a converter."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import framework.functional as F
from framework.autograd import Function
from framework.onnx import ops
from framework.onnx.graph import converters

from ._util import require_onnx

require_onnx()


def _functions() -> set:
    """Every Function subclass defined in a module of framework.functional."""
    found = set()
    for info in pkgutil.iter_modules(F.__path__):
        module = importlib.import_module(f"{F.__name__}.{info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Function) and obj is not Function \
                    and obj.__module__ == module.__name__:
                found.add(obj)
    return found


def test_every_function_has_a_converter_or_a_reason():
    functions, have = _functions(), set(converters())
    assert len(functions) > 60  # the walk found the ops (68 at this writing)
    missing = sorted(f"{f.__module__}.{f.__qualname__}" for f in functions - have
                     if f not in ops.NOT_EXPORTABLE)
    assert missing == [], f"no ONNX converter and not in ops.NOT_EXPORTABLE: {missing}"


def test_the_not_exportable_list_is_exact_and_says_why():
    for fn, why in ops.NOT_EXPORTABLE.items():
        assert fn in _functions() and fn not in converters(), fn
        assert isinstance(why, str) and len(why) > 20, fn
