"""Framework overhead per op call: a chain of 10,000 tiny ops (x = x * 1.0001 + 0.0001 on a 4-element
tensor that requires grad: two Functions per link) recorded and run backward, against the same chain
in torch. At this size the arithmetic is nothing: the row is Python, graph recording and the
backward engine per op. The note gives microseconds per op call (forward + its share of backward).

Run through the harness: `python scripts/benchmark.py --only overhead --threads 2`.
"""
from __future__ import annotations

import contextlib

import numpy as np

from benchmark import Row, time_pair

import framework as sg

TITLE = "Framework overhead: a chain of 10,000 tiny ops, forward + backward"

LINKS = 5000  # two ops per link: 10,000 op calls


def _chain(x):
    """The chain itself: the same code runs on a srgrad or a torch tensor."""
    for _ in range(LINKS):
        x = x * 1.0001 + 0.0001
    return x


def _with_backward(x0):
    def run():
        _chain(x0).sum().backward()
        x0.grad = None
    return run


def _forward_only(x0):
    """The chain under no_grad (set by the caller): what recording and backward add shows in the
    difference."""
    return lambda: _chain(x0)


def run(args) -> list:
    try:
        import torch
    except ImportError:
        torch = None
    ones = np.ones(4, np.float32)
    ours = sg.tensor(ones, requires_grad=True)
    theirs = torch.ones(4, requires_grad=True) if torch else None
    a, b = time_pair(_with_backward(ours), _with_backward(theirs) if torch else None, args.repeat)
    ops = 2 * LINKS

    def note(a, b):
        theirs = f" vs {1e3 * b / ops:.1f}" if b else ""
        return f"{1e3 * a / ops:.1f}{theirs} us per op"
    rows = [Row(f"{ops:,}-op chain, forward + backward", a, b, note=note(a, b))]
    with sg.no_grad(), (torch.no_grad() if torch else contextlib.nullcontext()):
        a, b = time_pair(_forward_only(sg.tensor(ones)),
                         _forward_only(torch.from_numpy(ones)) if torch else None, args.repeat)
    rows.append(Row(f"{ops:,}-op chain, forward only (no_grad)", a, b, note=note(a, b)))
    return rows
