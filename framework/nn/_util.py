"""What the thin layers share: the input-shape check, the error prefix naming the layer, and where a
frozen network's weight file is found."""
from __future__ import annotations

import os


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


def weight_file(owner: str, given, env: str, url: str, keyword: str, kind: str, cached: str) -> str:
    """The path of a pretrained file: the keyword's value `given`, else the environment variable
    `env`, else `cached` in srgrad's model cache ($SRGRAD_HOME/models: where the commands download
    it, engine/hub/models.py's AUXILIARY); else a FileNotFoundError naming where to download it (`url`)
    and how to point srgrad at it."""
    from ..io.download import srgrad_home
    path = given if given is not None else os.environ.get(env)
    if path is None and (srgrad_home("models") / cached).is_file():
        path = os.fspath(srgrad_home("models") / cached)
    if path and os.path.isfile(path):
        return os.fspath(path)
    where = (f"{keyword}={os.fspath(path)!r} is not a file" if given is not None else
             f"{env}={path!r} is not a file" if path else f"no {kind} file given")
    raise FileNotFoundError(f"{owner}: {where}. Download {url}, then point srgrad at it: "
                            f"`{keyword}: /path/to/{url.rsplit('/', 1)[1]}`, or {env}=/path/to/it, "
                            f"or save it as {srgrad_home('models') / cached} (srgrad-eval --metrics "
                            f"and srgrad-train download it there)")
