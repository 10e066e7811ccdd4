"""Adam in one pass per parameter (`Adam(..., fused=True)`, and the captured training step's): one
numba kernel reads each element's parameter, gradient and moments once and writes them once, where
the eager update (adam.py's `_update`) makes ~10 numpy passes and temporaries per parameter. Each
element gets exactly the eager update's operations, in its order, in the parameter's dtype (no FMA
contraction, no reassociation: framework/_jit.py's policy), so the results are bit-identical to it
(tests/framework/optim/test_fused_adam.py). A parameter above CHUNK elements runs in chunks on
numba's threads, a smaller one on the calling thread. The scalars (bias corrections, step size) are
computed once per group and step, in double precision as torch (and the eager update) computes them.

One kernel call per parameter, not one over all of them: numba's typed lists (an argument holding
every parameter's array) compile for ~1.5 s in every process, more than a short run saves.
"""
from __future__ import annotations

import numpy as np
from .._jit import kernel, prange

CHUNK = 1 << 14
# columns of the scalar table, each in the parameter's dtype
_DECAY, _WD, _W1, _W1M1, _BETA2, _OMB2, _BC2, _EPS, _NEGSTEP = range(9)
# columns of the flag table
_MAXIMIZE, _DECOUPLED, _AMSGRAD, _SMALL_W = range(4)


@kernel
def _adam_range(p, g, m, v, vm, s, f, lo, hi):
    """Elements [lo, hi) of one flat parameter: adam.py's `_update`, element by element."""
    wd = s[_WD]
    for i in range(lo, hi):
        gi = -g[i] if f[_MAXIMIZE] else g[i]
        pi = p[i]
        if wd != 0:
            if f[_DECOUPLED]:
                pi = pi * s[_DECAY]
            else:
                gi = gi + wd * pi
        diff = gi - m[i]  # torch's lerp, its two branches
        if f[_SMALL_W]:
            mi = m[i] + diff * s[_W1]
        else:
            mi = gi + diff * s[_W1M1]
        m[i] = mi
        vi = v[i] * s[_BETA2]
        vi = vi + s[_OMB2] * gi * gi
        v[i] = vi
        if f[_AMSGRAD]:
            mx = vm[i]
            if vi > mx or vi != vi:  # np.maximum: the larger, NaN if either is
                mx = vi
            vm[i] = mx
            d = np.sqrt(mx)
        else:
            d = np.sqrt(vi)
        d = d / s[_BC2]
        d = d + s[_EPS]
        u = s[_NEGSTEP] * mi
        u = u / d
        p[i] = pi + u


@kernel
def _adam_serial(p, g, m, v, vm, s, f):
    _adam_range(p, g, m, v, vm, s, f, 0, p.shape[0])


@kernel(parallel=True)
def _adam_parallel(p, g, m, v, vm, s, f):
    n = p.shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        _adam_range(p, g, m, v, vm, s, f, c * CHUNK, min(n, (c + 1) * CHUNK))


def step(opt) -> bool:
    """The fused update of Adam optimizer `opt` (every parameter with a gradient); False, with
    nothing done, when the parameters cannot take it: not all of one dtype, or an array not
    contiguous (the caller then runs the per-parameter update)."""
    entries = []
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                g = p.grad.data if hasattr(p.grad, "data") else np.asarray(p.grad)
                entries.append((group, p.data, g))
    if not entries:
        return True
    dtype = entries[0][1].dtype
    if any(p.dtype != dtype or g.dtype != dtype or g.shape != p.shape or
           not (p.flags.c_contiguous and g.flags.c_contiguous) for _, p, g in entries):
        return False
    params = [p for group in opt.param_groups for p in group["params"] if p.grad is not None]
    states = [_state(opt, group, p) for (group, _, _), p in zip(entries, params)]
    if any(not (st["exp_avg"].flags.c_contiguous and st["exp_avg_sq"].flags.c_contiguous)
           or st["exp_avg"].dtype != dtype or st["exp_avg_sq"].dtype != dtype for st in states):
        return False
    dt, rows, none = dtype.type, {}, np.zeros(1, dtype)
    for (group, p, g), st in zip(entries, states):
        st["step"] += 1
        key = (id(group), st["step"])
        if key not in rows:  # the scalars of a group at a step: computed once
            rows[key] = _scalars(group, st["step"], dt, dtype)
        s, f = rows[key]
        vm = st.get("max_exp_avg_sq") if group["amsgrad"] else none
        kern = _adam_parallel if p.size > CHUNK else _adam_serial
        kern(p.reshape(-1), g.reshape(-1), st["exp_avg"].reshape(-1), st["exp_avg_sq"].reshape(-1),
             vm.reshape(-1), s, f)
    return True


def _state(opt, group, p):
    """adam.py's lazy state, made as its `_update` makes it."""
    state = opt.state[p]
    if not state:
        state["step"] = 0
        state["exp_avg"] = np.zeros_like(p.data)
        state["exp_avg_sq"] = np.zeros_like(p.data)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = np.zeros_like(p.data)
    if group["amsgrad"] and "max_exp_avg_sq" not in state:  # amsgrad switched on mid-run
        state["max_exp_avg_sq"] = np.zeros_like(p.data)
    return state


def _scalars(group, step, dt, dtype):
    """(scalars, flags) of a group at a step, each value as adam.py's `_update` computes it."""
    lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    w1 = dt(1 - beta1)
    bias_correction1 = 1 - beta1 ** step  # Python floats (double), as torch
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    step_size = lr / bias_correction1
    scal = (dt(1 - lr * wd), dt(wd), w1, w1 - dt(1), dt(beta2), dt(1 - beta2),
            dt(bias_correction2_sqrt), dt(eps), dt(-step_size))
    flags = (group["maximize"], group["decoupled_weight_decay"], group["amsgrad"], abs(w1) < 0.5)
    return np.array(scal, dtype), np.array(flags, np.bool_)
