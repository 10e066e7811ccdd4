"""Framework overhead per op call: a chain of 10,000 tiny ops (x = x * 1.0001 + 0.0001 on a 4-element
tensor that requires grad: two Functions per link) recorded and run backward, against the same chain
in torch. At this size the arithmetic is nothing: the row is Python, graph recording and the
backward engine per op. The note gives microseconds per op call (forward + its share of backward).

Run through the harness: `python scripts/benchmark.py --only overhead --threads 2`.
"""
from __future__ import annotations

import numpy as np

from benchmark import Row, time_pair

import framework as sg

TITLE = "Framework overhead: a chain of 10,000 tiny ops, forward + backward"

LINKS = 5000  # two ops per link: 10,000 op calls


def _ours():
    x0 = sg.tensor(np.ones(4, np.float32), requires_grad=True)

    def run():
        x = x0
        for _ in range(LINKS):
            x = x * 1.0001 + 0.0001
        x.sum().backward()
        x0.grad = None
    return run


def _theirs():
    import torch
    x0 = torch.ones(4, requires_grad=True)

    def run():
        x = x0
        for _ in range(LINKS):
            x = x * 1.0001 + 0.0001
        x.sum().backward()
        x0.grad = None
    return run


def _forward_only(make):
    """The same chain under no_grad: what recording and backward add shows in the difference."""
    def run():
        x = make(np.ones(4, np.float32))
        for _ in range(LINKS):
            x = x * 1.0001 + 0.0001
    return run


def run(args) -> list:
    try:
        import torch
    except ImportError:
        torch = None
    a, b = time_pair(_ours(), _theirs() if torch else None, args.repeat)
    ops = 2 * LINKS
    rows = [Row(f"{ops:,}-op chain, forward + backward", a, b,
                note=f"{1e3 * a / ops:.1f} vs {1e3 * b / ops:.1f} us per op" if b else
                f"{1e3 * a / ops:.1f} us per op")]
    with sg.no_grad():
        ours_fwd = _forward_only(sg.tensor)
        theirs_fwd = _forward_only(torch.from_numpy) if torch else None
        if torch:
            with torch.no_grad():
                a, b = time_pair(ours_fwd, theirs_fwd, args.repeat)
        else:
            a, b = time_pair(ours_fwd, None, args.repeat)
    rows.append(Row(f"{ops:,}-op chain, forward only (no_grad)", a, b,
                    note=f"{1e3 * a / ops:.1f} vs {1e3 * b / ops:.1f} us per op" if b else
                    f"{1e3 * a / ops:.1f} us per op"))
    return rows
