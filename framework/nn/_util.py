"""What the thin layers share: the input-shape check and the error prefix naming the layer."""
from __future__ import annotations


def check_4d(layer: str, x, channels=None):
    """ValueError naming the layer and both shapes unless x is (N, channels, H, W)."""
    shape = tuple(x.shape)
    expected = f"(N, {channels}, H, W)" if channels is not None else "(N, C, H, W)"
    if len(shape) != 4 or (channels is not None and shape[1] != channels):
        raise ValueError(f"{layer}: expected input of shape {expected}, got {shape}")


def call(layer: str, fn, *args):
    """fn(*args), with a ValueError from the functional op's checks prefixed by the layer's name (the
    op's message already gives the shapes): "Conv2d(3, 4, kernel_size=(5, 5)): conv2d: kernel ..."."""
    try:
        return fn(*args)
    except ValueError as e:
        raise ValueError(f"{layer}: {e}") from None
