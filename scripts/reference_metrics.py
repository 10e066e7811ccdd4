"""Reference values of srgrad's perceptual and no-reference metrics, computed by the original code.

srgrad's tests hold the values this prints (tests/framework/metrics/test_reference_values.py), so a
change of srgrad's NIQE or LPIPS that moves them fails there; this script says how they were made.
It runs the originals' own files from their published packages, none of which srgrad depends on:

    pip download --no-deps --no-binary :all: basicsr==1.4.2 && tar xzf basicsr-1.4.2.tar.gz
    pip download --no-deps lpips==0.1.4 && unzip -q lpips-0.1.4-py3-none-any.whl -d lpips-0.1.4
    pip download --no-deps DISTS-pytorch==0.1 && unzip -q DISTS_pytorch-0.1-py3-none-any.whl -d dists-0.1
    pip install --target /tmp/refpkgs scipy==1.17.1 opencv-python-headless==5.1.0.95
    python scripts/reference_metrics.py --basicsr basicsr-1.4.2 --lpips lpips-0.1.4 --dists dists-0.1 \
        --extra /tmp/refpkgs

NIQE: BasicSR's `calculate_niqe` (basicsr/metrics/niqe.py with its niqe_pris_params.npz; its scipy
and cv2 calls as they are) on the bundled images, crop_border 0 and 4. LPIPS: the lpips package's
`LPIPS(net=..., version='0.1')` class, whose torchvision backbone is replaced by a stand-in module
(`torchvision.models.alexnet` / `vgg16` returning torchvision's `features` layout) holding the seeded
weights of `seeded_state` (no pretrained file can be downloaded where the tests run), and
`model_path=` a linear-layer file of seeded weights; the same files go to srgrad in the test. DISTS:
the DISTS_pytorch package's DISTS class (DISTS_pt.py), its VGG16 replaced the same way, alpha and
beta seeded (`seeded_dists`).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ["data/val/gravel.png", "data/val/ihc.png", "data/train/astronaut.png", "data/train/brick.png"]


def seeded_state(net: str, seed: int = 0):
    """(backbone, lin) state dicts of float32 arrays for srgrad's NETS[net], from numpy's PCG64:
    He-normal convolution weights, small biases, non-negative linear weights (as trained LPIPS's)."""
    sys.path.insert(0, str(ROOT))
    from framework.nn.lpips import NETS
    rng = np.random.default_rng(seed)
    spec, backbone = NETS[net], {}
    for i, layer in enumerate(spec["features"]):
        if layer[0] == "conv":
            _, cin, cout, k, _, _ = layer
            backbone[f"features.{i}.weight"] = (rng.standard_normal((cout, cin, k, k)) *
                                                np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
            backbone[f"features.{i}.bias"] = (0.01 * rng.standard_normal(cout)).astype(np.float32)
    lin = {f"lin{k}.model.1.weight": np.abs(rng.standard_normal((1, c, 1, 1)) / c).astype(np.float32)
           for k, c in enumerate(spec["channels"])}
    return backbone, lin


def pair(size: int = 64):
    """Two (3, size, size) float32 images in [0, 1]: a crop of astronaut.png and the crop 6 pixels
    to its right with 8-bit noise (what the recorded distances compare)."""
    sys.path.insert(0, str(ROOT))
    from framework.io.image import read_image
    img, _ = read_image(ROOT / "data/train/astronaut.png")
    a = np.ascontiguousarray(img[:, 40:40 + size, 60:60 + size])
    b = img[:, 40:40 + size, 66:66 + size]
    noise = np.random.default_rng(7).integers(-12, 13, a.shape) / 255.0
    return a, np.clip(b + noise, 0, 1).astype(np.float32)


def _torch_features(features, state):
    """torchvision's `features` Sequential for srgrad's layer list, holding `state` (features.<i>.*)."""
    import torch
    layers = torch.nn.Sequential()
    for i, spec in enumerate(features):
        if spec[0] == "conv":
            layers.add_module(str(i), torch.nn.Conv2d(*spec[1:4], stride=spec[4], padding=spec[5]))
        elif spec[0] == "relu":
            layers.add_module(str(i), torch.nn.ReLU(inplace=True))
        else:
            layers.add_module(str(i), torch.nn.MaxPool2d(kernel_size=spec[1], stride=spec[2]))
    layers.load_state_dict({k.split(".", 1)[1]: torch.from_numpy(v) for k, v in state.items()})
    return layers


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def niqe_reference(src: Path) -> dict:
    import cv2
    import scipy.ndimage
    b = src / "basicsr"
    for name in ("basicsr", "basicsr.utils", "basicsr.metrics"):
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = []
    color = _load("basicsr.utils.color_util", b / "utils/color_util.py")
    sys.modules["basicsr.utils"].bgr2ycbcr = color.bgr2ycbcr
    _load("basicsr.utils.matlab_functions", b / "utils/matlab_functions.py")
    registry = types.ModuleType("basicsr.utils.registry")
    registry.METRIC_REGISTRY = types.SimpleNamespace(register=lambda: (lambda f: f))
    sys.modules["basicsr.utils.registry"] = registry
    _load("basicsr.metrics.metric_util", b / "metrics/metric_util.py")
    sys.modules["scipy.ndimage.filters"] = scipy.ndimage  # the name BasicSR 1.4.2 imports
    niqe = _load("basicsr.metrics.niqe", b / "metrics/niqe.py")
    return {f"{Path(p).name}|{cb}": niqe.calculate_niqe(cv2.imread(str(ROOT / p), cv2.IMREAD_UNCHANGED),
                                                        crop_border=cb, input_order="HWC", convert_to="y")
            for p in IMAGES for cb in (0, 4)}


def lpips_reference(src: Path) -> dict:
    import torch
    sys.path.insert(0, str(ROOT))
    from framework.nn.lpips import NETS
    current = {}

    def stand_in(net):
        def build(pretrained=True, **_):
            return types.SimpleNamespace(features=_torch_features(NETS[net]["features"], current["backbone"]))
        return build

    tv = types.ModuleType("torchvision")
    tv.models = types.SimpleNamespace(alexnet=stand_in("alex"), vgg16=stand_in("vgg"),
                                      squeezenet1_1=None)
    sys.modules["torchvision"], sys.modules["torchvision.models"] = tv, tv.models
    sys.path.insert(0, str(src))
    import lpips
    a, b = pair()
    out = {}
    for net in ("alex", "vgg"):
        backbone, lin = seeded_state(net)
        current["backbone"] = backbone
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "lin.pth"
            torch.save({k: torch.from_numpy(v) for k, v in lin.items()}, path)
            model = lpips.LPIPS(net=net, version="0.1", model_path=str(path), verbose=False)
        with torch.no_grad():
            d = model(torch.from_numpy(a[None]), torch.from_numpy(b[None]), normalize=True)
            same = model(torch.from_numpy(a[None]), torch.from_numpy(a[None]), normalize=True)
        out[net] = float(d.reshape(-1)[0])
        out[f"{net}|same"] = float(same.reshape(-1)[0])
    return out


def seeded_dists(seed: int = 0):
    """(backbone, alpha-beta) of DISTS: VGG16's seeded_state backbone, alpha and beta ~ 0.1 + 0.01 N."""
    backbone, _ = seeded_state("vgg", seed)
    rng = np.random.default_rng(seed + 1)
    n = 3 + 64 + 128 + 256 + 512 + 512
    return backbone, {k: (0.1 + 0.01 * rng.standard_normal((1, n, 1, 1))).astype(np.float32)
                      for k in ("alpha", "beta")}


def dists_reference(src: Path) -> dict:
    import torch
    sys.path.insert(0, str(ROOT))
    from framework.nn.lpips import NETS
    backbone, ab = seeded_dists()

    def vgg16(pretrained=True, **_):
        return types.SimpleNamespace(features=_torch_features(NETS["vgg"]["features"] + [("pool", 2, 2)],
                                                              backbone))

    tv = types.ModuleType("torchvision")
    tv.models, tv.transforms = types.SimpleNamespace(vgg16=vgg16), types.SimpleNamespace()
    sys.modules["torchvision"] = tv
    dists = _load("DISTS_pt", src / "DISTS_pytorch" / "DISTS_pt.py")
    model = dists.DISTS(load_weights=False)
    with torch.no_grad():
        model.alpha.copy_(torch.from_numpy(ab["alpha"]))
        model.beta.copy_(torch.from_numpy(ab["beta"]))
    a, b = pair()
    d = model(torch.from_numpy(a[None]), torch.from_numpy(b[None]))
    same = model(torch.from_numpy(a[None]), torch.from_numpy(a[None]))
    return {"dists": float(d), "dists|same": float(same)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--basicsr", type=Path, help="an unpacked BasicSR 1.4.2 source tree")
    ap.add_argument("--lpips", type=Path, help="an unpacked lpips 0.1.4 wheel")
    ap.add_argument("--dists", type=Path, help="an unpacked DISTS_pytorch 0.1 wheel")
    ap.add_argument("--extra", type=Path, help="a folder with scipy and cv2 (pip install --target)")
    args = ap.parse_args(argv)
    if args.extra:
        sys.path.insert(0, str(args.extra))
    out = {}
    if args.basicsr:
        out["niqe"] = niqe_reference(args.basicsr)
    if args.lpips:
        out["lpips"] = lpips_reference(args.lpips)
    if args.dists:
        out["dists"] = dists_reference(args.dists)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
