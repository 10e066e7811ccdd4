"""Seconds per training step (forward, L1 loss, backward, Adam) of a model at a chosen size: for
README's "not trainable on a CPU (N s a step)" rows. The model is a traiNNer-redux preset name
(framework/engine/config/redux_archs.py: atd_light, hat_s, ...) or srgrad's model type with its
defaults; random LR / HR tensors; the median of the steps after the first (numba compiles there).

    python scripts/step_time.py atd_light --scale 2 --lr-size 32 --batch 1 --steps 4
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    import numpy as np

    import framework as sg
    import framework.functional as F
    import models  # noqa: F401  registers every architecture
    from framework.engine.config.redux_archs import PRESETS
    from framework.optim import Adam
    from framework.registry import MODELS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a traiNNer-redux preset name or an srgrad model type")
    p.add_argument("--scale", type=int, default=2)
    p.add_argument("--lr-size", type=int, default=32)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=4, help="timed steps, the first one included")
    a = p.parse_args(argv)
    kind, kw = PRESETS.get(a.model.lower(), (a.model, {}))
    model = MODELS.build({"type": kind, **kw, "scale": a.scale})
    opt = Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = sg.tensor(rng.uniform(0, 1, (a.batch, 3, a.lr_size, a.lr_size)).astype(np.float32))
    hr = a.lr_size * a.scale
    y = sg.tensor(rng.uniform(0, 1, (a.batch, 3, hr, hr)).astype(np.float32))
    print(f"{a.model} ({kind}) x{a.scale}: {sum(q.data.size for q in model.parameters())} "
          f"parameters, batch {a.batch} of {a.lr_size}x{a.lr_size} LR")
    times = []
    for i in range(max(a.steps, 2)):
        t0 = time.perf_counter()
        opt.zero_grad()
        F.l1_loss(model(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        print(f"step {i}: {times[-1]:.2f} s", flush=True)
    print(f"median after the first: {np.median(times[1:]):.2f} s a step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
