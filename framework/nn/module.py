"""Module, Parameter, Sequential, ModuleList: PyTorch's container semantics (attribute assignment
registers, dotted state_dict keys, train/eval, forward hooks)."""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from contextlib import contextmanager

import numpy as np

from .._check import flag
from ..tensor import Tensor, _as_array


class BudgetError(ValueError):
    """A model being built would hold more values than parameter_budget allows."""


_budget = None  # [values left, limit, what is being built] inside parameter_budget, else None


@contextmanager
def parameter_budget(limit: int, what: str):
    """Within the block, Parameters and buffers of more than `limit` values in all raise
    BudgetError (naming `what`) as they are created, before their memory is written: a model spec
    read from a file cannot make srgrad allocate more than the file's weights (a spec asking for
    num_feat 8000 or 10^9 layers is refused at once). An inner block replaces the outer one."""
    global _budget
    saved, _budget = _budget, [int(limit), int(limit), what]
    try:
        yield
    finally:
        _budget = saved


def claim(n: int) -> None:
    """Count `n` values against the active parameter_budget (nothing outside one) before
    allocating them: for a buffer computed before it is registered (SwinIR's attention masks)."""
    _spend(int(n))


def _spend(n: int) -> None:
    if _budget is not None:
        _budget[0] -= n
        if _budget[0] < 0:
            raise BudgetError(f"{_budget[2]} would hold more than {_budget[1]} values, more than "
                              f"its weights: refused before building it")


class Parameter(Tensor):
    """A Tensor that a Module registers as trainable (requires_grad=True by default)."""

    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True, dtype=None):
        if isinstance(data, np.ndarray):
            _spend(data.size)  # before the copy below writes the pages
        arr = _as_array(data, dtype)
        if not isinstance(data, np.ndarray):
            _spend(arr.size)
        super().__init__(np.array(arr, copy=True), requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

_hook_ids = itertools.count()


class RemovableHandle:
    """What register_forward_(pre_)hook returns: `.remove()` unregisters the hook (again is a no-op);
    also a context manager that removes it on exit, as torch.utils.hooks.RemovableHandle."""

    def __init__(self, hooks: OrderedDict, with_kwargs: set):
        self.id = next(_hook_ids)
        self._hooks, self._with_kwargs = hooks, with_kwargs

    def remove(self) -> None:
        self._hooks.pop(self.id, None)
        self._with_kwargs.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class Module:
    """Base class of layers and networks. Assigning a Parameter or Module attribute registers it;
    `register_buffer` keeps non-trainable state (e.g. running statistics) in the state_dict."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_hooks_with_kwargs", set())

    # -- registration --------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning "
                                 f"attribute {name!r}")
        was_param = name in self._parameters  # `self.bias = None` keeps bias registered, as torch
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        if isinstance(value, Parameter) or (value is None and was_param):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self.__dict__.get("_buffer_names", ()):
            self._buffers[name] = value if value is None or isinstance(value, Tensor) else Tensor(value)
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value) -> None:
        """Non-trainable state saved in state_dict (a Tensor, or None)."""
        names = self.__dict__.setdefault("_buffer_names", set())
        names.add(name)
        self.__dict__.pop(name, None)
        if value is not None:
            _spend(int(np.size(value.data if isinstance(value, Tensor) else value)))
        self._buffers[name] = value if value is None or isinstance(value, Tensor) else Tensor(value)

    def register_parameter(self, name: str, value) -> None:
        if value is None:
            self._parameters[name] = None
        else:
            setattr(self, name, value)

    def add_module(self, name: str, module) -> None:
        self._modules[name] = module

    # -- traversal -----------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) pairs, depth first. A module reached twice is listed once unless
        remove_duplicate=False (state_dict needs every path, as torch does)."""
        stack = [(prefix, self)]
        seen = set()
        while stack:
            name, mod = stack.pop(0)
            if remove_duplicate and id(mod) in seen:
                continue
            seen.add(id(mod))
            yield name, mod
            stack[0:0] = [(f"{name}.{k}" if name else k, m) for k, m in mod._modules.items()
                          if m is not None]

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((k, m) for k, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, mod in mods:
            for k, p in mod._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{k}" if mname else k), p

    def parameters(self, recurse: bool = True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = ""):
        for mname, mod in self.named_modules(prefix):
            for k, b in mod._buffers.items():
                if b is not None:
                    yield (f"{mname}.{k}" if mname else k), b

    def buffers(self):
        return (b for _, b in self.named_buffers())

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Dotted name -> numpy array (the live arrays, as torch returns live tensors: copy them
        if the module will keep training)."""
        out = OrderedDict()
        for mname, mod in self.named_modules(remove_duplicate=False):
            for k, v in list(mod._parameters.items()) + list(mod._buffers.items()):
                if v is not None:
                    out[f"{mname}.{k}" if mname else k] = v.data
        return out

    def load_state_dict(self, state_dict, strict: bool = True) -> IncompatibleKeys:
        """Copy arrays into this module's parameters and buffers in place (optimizers keep their
        references). strict: missing or unexpected keys are an error. A shape mismatch is always an
        error naming the key and both shapes."""
        own = self.state_dict()
        targets = {}
        for mname, mod in self.named_modules(remove_duplicate=False):
            for k, v in list(mod._parameters.items()) + list(mod._buffers.items()):
                if v is not None:
                    targets[f"{mname}.{k}" if mname else k] = v
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and (missing or unexpected):
            errors.append(f"missing keys {missing}, unexpected keys {unexpected}")
        for k, v in state_dict.items():
            if k in own:
                arr = np.asarray(v.data if isinstance(v, Tensor) else v)
                if arr.shape != own[k].shape:
                    errors.append(f"{k}: checkpoint shape {arr.shape}, model shape {own[k].shape}")
        if errors:
            raise ValueError(f"{type(self).__name__}.load_state_dict: " + "; ".join(errors))
        for k, v in state_dict.items():
            if k in targets:
                arr = np.asarray(v.data if isinstance(v, Tensor) else v)
                np.copyto(targets[k].data, arr, casting="unsafe")
        return IncompatibleKeys(missing, unexpected)

    # -- modes and housekeeping ----------------------------------------------------------------
    def train(self, mode: bool = True):
        """Set training mode here and, through each child's own `train()` (as torch: an override
        on a child, e.g. a frozen feature extractor that stays in eval, is honoured), below."""
        object.__setattr__(self, "training", bool(mode))
        for child in self._modules.values():
            if child is not None:
                child.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def apply(self, fn):
        for m in list(self.modules())[::-1]:
            fn(m)
        return self

    def to(self, *args, **kwargs):
        """torch's Module.to: `to(dtype)`, `to("cpu")`, `to(device="cpu", dtype=...)`. Converts
        every parameter and float buffer to the dtype in place (objects kept); a device is only
        checked (the CPU is the one there is)."""
        from ..tensor import parse_to
        dtype, _ = parse_to(f"{type(self).__name__}.to", args, kwargs)
        if dtype is None:
            return self
        dtype = np.dtype(dtype)
        for t in list(self.parameters()) + list(self.buffers()):
            if t.data.dtype.kind == "f":
                t.data = t.data.astype(dtype)
                t.grad = None
        return self

    def cpu(self):
        """torch's Module.cpu(): everything already is."""
        return self

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- calling -------------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        """torch's Module._call_impl: pre-hooks in order (each may replace the positional args, or
        args and kwargs when registered with_kwargs), forward, then hooks (each may replace the
        output). The dicts are copied first, so a hook may remove itself."""
        with_kwargs = self._hooks_with_kwargs
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {result!r}.")
                    args, kwargs = result
                    args = args if isinstance(args, tuple) else (args,)
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_hooks.items()):
            result = hook(self, args, kwargs, output) if hid in with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Run `hook(module, args)` before every forward; a non-None return replaces the positional
        arguments (a single value is wrapped in a tuple). with_kwargs=True: `hook(module, args,
        kwargs)` returning None or (args, kwargs). prepend=True runs it before the hooks already
        registered. Returns a handle whose .remove() unregisters it."""
        return self._add_hook(self._forward_pre_hooks, "register_forward_pre_hook", hook, prepend,
                              with_kwargs)

    def register_forward_hook(self, hook, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Run `hook(module, args, output)` after every forward (args: the positional arguments
        forward received); a non-None return replaces the output. with_kwargs=True: `hook(module,
        args, kwargs, output)`. prepend, the handle: as register_forward_pre_hook."""
        return self._add_hook(self._forward_hooks, "register_forward_hook", hook, prepend, with_kwargs)

    def _add_hook(self, store, owner, hook, prepend, with_kwargs) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{owner}: hook must be callable, got {type(hook).__name__}")
        with_kwargs, prepend = flag(owner, "with_kwargs", with_kwargs), flag(owner, "prepend", prepend)
        handle = RemovableHandle(store, self._hooks_with_kwargs)
        store[handle.id] = hook
        if with_kwargs:
            self._hooks_with_kwargs.add(handle.id)
        if prepend:
            store.move_to_end(handle.id, last=False)
        return handle

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"({k}): " + repr(m).replace("\n", "\n  ") for k, m in self.named_children()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"


class Sequential(Module):
    """Modules applied in order; `Sequential(a, b)` or `Sequential(OrderedDict(name=a, ...))`."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for k, m in modules[0].items():
                self.add_module(str(k), m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return Sequential(*mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered under "0", "1", ... ; no forward of its own."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return ModuleList(mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys (torch's ModuleDict: [key], keys,
    values, items, update, pop, `in`, len, iteration over the keys); no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        """Add (key, module) pairs from a mapping or an iterable of pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for key, module in pairs:
            self[key] = module
