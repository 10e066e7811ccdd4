"""issue 40's done-when check: a `.pth` built with spandrel 0.4.2's OWN network class (not a twin),
in a published layout, runs through `srgrad-infer --weights FILE` with no --model (detected) and
gives spandrel's image to <= 1 8-bit level. spandrel's image is its ImageModelDescriptor's call
(its own detection of the file, its size-requirement padding) on the same 8-bit input, clamped and
rounded as an 8-bit image. Skips with the reason when spandrel 0.4.2 is absent
(tests/twins/_spandrel.spandrel_architecture)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image


def spandrel_image(descriptor, rgb: np.ndarray) -> np.ndarray:
    """spandrel's 8-bit output for an (H, W, C) uint8 image: descriptor(x) in float32 on [0, 1]."""
    import torch
    x = torch.from_numpy(rgb.astype(np.float32).transpose(2, 0, 1)[None] / 255.0)
    with torch.no_grad():
        y = descriptor(x)[0].clamp(0, 1).numpy().transpose(1, 2, 0)
    return np.round(y * 255.0).astype(np.uint8)


def check_spandrel_file(module, network, tmp_path, size=(20, 27), wrap=None, seed=0) -> dict:
    """`network` (built by spandrel's class from `module`, spandrel.architectures.<Name>) saved
    with torch.save (its bare state_dict, or {wrap: state_dict}) -> spandrel's own load (detect +
    keywords) and srgrad-infer --weights on one RGB PNG of `size` (h, w) -> the two 8-bit images
    differ by at most 1 level. Returns spandrel's hyperparameters for the file."""
    import torch
    from framework.engine.commands.cli import infer_main
    arch = next(v for k, v in vars(module).items() if k.endswith("Arch") and isinstance(v, type))()
    network = network.eval()
    state = network.state_dict()
    assert arch.detect(state), "spandrel's own detection refuses the file"
    descriptor = arch.load(dict(state))  # a copy: GRL's load deletes the buffer keys it has read
    descriptor.model.eval()
    path = tmp_path / "published.pth"
    torch.save({wrap: state} if wrap else state, str(path))
    rgb = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "in.png")
    assert infer_main(["--weights", str(path), "--input", str(tmp_path / "in.png"),
                       "--output", str(tmp_path / "out.png"), "--no-progress"]) == 0
    ours = np.asarray(Image.open(tmp_path / "out.png").convert("RGB")).astype(np.int64)
    theirs = spandrel_image(descriptor, rgb).astype(np.int64)
    assert ours.shape == theirs.shape
    diff = np.abs(ours - theirs).max()
    assert diff <= 1, f"srgrad-infer differs from spandrel by {diff} 8-bit levels"
    assert np.ptp(theirs) > 0  # not a blank image
    return dict(descriptor.model.hyperparameters) if hasattr(descriptor.model, "hyperparameters") else {}
