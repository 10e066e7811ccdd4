"""gradcheck: compare a Function's backward with float64 central differences over the full Jacobian.
Public API: check a custom layer with it before training through it."""
from __future__ import annotations

import numpy as np

from .autograd import no_grad
from .tensor import Tensor


class GradcheckError(AssertionError):
    pass


def _outputs(fn, inputs):
    out = fn(*inputs)
    return out if isinstance(out, (tuple, list)) else (out,)


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True when d(fn)/d(input) from backward matches (f(x+eps)-f(x-eps))/(2 eps) for every input
    that requires grad and every output element: |analytic - numeric| <= atol + rtol*|numeric|.

    fn: callable of Tensors returning a Tensor (or tuple). inputs: Tensor or tuple of Tensors; those
    with requires_grad are checked and must be float64. On failure raises GradcheckError naming the
    input, the input element, the output element, the numeric and the analytic value. The inputs
    are perturbed in place while it runs and left as they were given: the same `.data` array with
    the same values, the same `.grad`."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype}; gradcheck needs float64 "
                            "(float32 central differences are too coarse)")
    # The caller's tensors are left as they were: the same .data array (values restored element by
    # element, even when fn raises) and the same .grad. The numeric loop perturbs a flat view, so a
    # non-contiguous .data is swapped for a contiguous copy while the check runs.
    kept = {}
    for i in checked:
        t = inputs[i]
        kept.setdefault(id(t), (t, t.data, t.grad))
        t.data = np.require(t.data, requirements="C")  # (ascontiguousarray makes a 0-d one 1-d)
    try:
        return _check(fn, inputs, checked, eps, atol, rtol, raise_exception)
    finally:
        for t, data, grad in kept.values():
            t.data, t.grad = data, grad


def _check(fn, inputs, checked, eps, atol, rtol, raise_exception) -> bool:
    outs = _outputs(fn, inputs)
    sizes = [o.numel() for o in outs]
    # Analytic Jacobian: one backward per output element, with a one-hot upstream gradient.
    analytic = {i: np.zeros((sum(sizes), inputs[i].numel())) for i in checked}
    row = 0
    for k, o in enumerate(outs):
        if not o.requires_grad:
            row += o.numel()
            continue
        for j in range(o.numel()):
            for i in checked:
                inputs[i].grad = None
            onehot = np.zeros(o.numel(), o.dtype)
            onehot[j] = 1
            o.backward(onehot.reshape(o.shape), retain_graph=True)
            for i in checked:
                g = inputs[i].grad
                if g is not None:
                    analytic[i][row + j] = g.data.ravel()
        row += o.numel()
    for i in checked:
        inputs[i].grad = None
    # Numeric Jacobian: perturb one input element at a time.
    with no_grad():
        for i in checked:
            flat = inputs[i].data.reshape(-1)  # a view: perturbs the tensor in place
            for e in range(flat.size):
                orig = flat[e]
                try:
                    flat[e] = orig + eps
                    plus = np.concatenate([o.data.ravel() for o in _outputs(fn, inputs)])
                    flat[e] = orig - eps
                    minus = np.concatenate([o.data.ravel() for o in _outputs(fn, inputs)])
                finally:
                    flat[e] = orig
                numeric = (plus - minus) / (2 * eps)
                got = analytic[i][:, e]
                bad = np.abs(got - numeric) > atol + rtol * np.abs(numeric)
                if bad.any():
                    if not raise_exception:
                        return False
                    r = int(np.argmax(bad))
                    in_idx = np.unravel_index(e, inputs[i].shape)
                    k, off = _locate(r, sizes)
                    out_idx = np.unravel_index(off, outs[k].shape)
                    raise GradcheckError(
                        f"gradcheck: input {i} element {tuple(map(int, in_idx))}, output {k} element "
                        f"{tuple(map(int, out_idx))}: expected (numeric) {numeric[r]:.10g}, got "
                        f"(analytic) {got[r]:.10g}")
    return True


def _locate(r, sizes):
    for k, s in enumerate(sizes):
        if r < s:
            return k, r
        r -= s
    return len(sizes) - 1, r
