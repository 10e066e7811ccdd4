"""Published models by name (`srgrad-infer -n NAME`, as Real-ESRGAN's `inference_realesrgan.py -n`):
the registry of release files srgrad runs, the cache folder they go to, fetch on first use, and
Real-ESRGAN's denoise-strength blend (`-dn`).

Each entry: the release file's official URL, its sha256 (from public sources: OpenModelDB's
data/models/*.json and projects that pin these files, which agree; the BasicSR EDSR hashes start
with the 8 hex digits BasicSR puts in the file names), and the model spec the original builds for
it (Real-ESRGAN's inference script, SwinIR's main_test_swinir.py, BasicSR's options/test/). An
entry whose sha256 no public source gives has `sha256=None`: srgrad then downloads it only against
a hash the user gives (--sha256). An entry without a direct URL (BasicSR publishes RCAN and MSRResNet
in Google Drive folders only) says where to get the file by hand.

The cache: `$SRGRAD_HOME/models` when SRGRAD_HOME is set, else `$XDG_CACHE_HOME/srgrad/models`
(`~/.cache/srgrad/models`). A file there is checked against its sha256 before every use.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ...io.download import DownloadError, check_sha256, download, make_folder, sha256_of, srgrad_home

__all__ = ["Published", "PUBLISHED", "get", "cache_dir", "fetch", "denoise_blend", "listing",
           "AUXILIARY", "fetch_auxiliary", "fetch_for",
           "DENOISE_DEFAULT", "add_arguments", "weights_from_args"]


class Published(NamedTuple):
    file: str  # the release file's name (the name it has in the cache)
    url: str | None  # the official release file; None: only by hand, from `page`
    sha256: str | None  # None: no public source gives it
    spec: dict  # the srgrad model spec (type, constructor keywords, scale)
    page: str = ""  # where the original project lists it
    partner: str | None = None  # the model -dn blends this one with (realesr-general-x4v3)


_RE = "https://github.com/xinntao/Real-ESRGAN/releases/download/"
_REAL = "https://github.com/xinntao/Real-ESRGAN"
_SWINIR = "https://github.com/JingyunLiang/SwinIR/releases/download/v0.0/"
_DRIVE = "https://drive.google.com/uc?export=download&confirm=1&id="
_BASICSR_ZOO = "https://github.com/XPixelGroup/BasicSR/blob/master/docs/ModelZoo.md"


def _rrdb(scale, blocks=23):
    return {"type": "RRDBNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64,
            "num_block": blocks, "num_grow_ch": 32, "scale": scale}


def _compact(num_conv):
    return {"type": "SRVGGNetCompact", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64,
            "num_conv": num_conv, "scale": 4, "act_type": "prelu"}


def _swinir(scale, kind, patch=64):
    """main_test_swinir.py's define_model for classical (M), lightweight (S), real (M) and real
    large (L) SR."""
    wide = {"depths": [6] * 6, "embed_dim": 180, "num_heads": [6] * 6}
    body = {"classical": wide, "real": wide,
            "lightweight": {"depths": [6] * 4, "embed_dim": 60, "num_heads": [6] * 4},
            "large": {"depths": [6] * 9, "embed_dim": 240, "num_heads": [8] * 9}}[kind]
    upsampler = {"classical": "pixelshuffle", "lightweight": "pixelshuffledirect"}.get(
        kind, "nearest+conv")
    return {"type": "SwinIR", "in_chans": 3, "img_size": patch, "window_size": 8,
            "img_range": 1.0, **body, "mlp_ratio": 2.0, "upsampler": upsampler,
            "resi_connection": "3conv" if kind == "large" else "1conv", "scale": scale}


def _edsr(scale, large=False):
    return {"type": "EDSR", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 256 if large else 64,
            "num_block": 32 if large else 16, "res_scale": 0.1 if large else 1.0,
            "img_range": 255.0, "rgb_mean": [0.4488, 0.4371, 0.4040], "scale": scale}


PUBLISHED: dict[str, Published] = {}

# Real-ESRGAN (inference_realesrgan.py's -n names): (name, release tag, sha256, spec, -dn partner)
_REALESRGAN_FILES = [
    ("RealESRGAN_x4plus", "v0.1.0",
     "4fa0d38905f75ac06eb49a7951b426670021be3018265fd191d2125df9d682f1", _rrdb(4), None),
    ("RealESRNet_x4plus", "v0.1.1",
     "a820b9bde89a874d7599d545567308ce6c128fc8754a53208eda016d40aa81df", _rrdb(4), None),
    ("RealESRGAN_x4plus_anime_6B", "v0.2.2.4",
     "f872d837d3c90ed2e05227bed711af5671a6fd1c9f7d7e91c911a61f155e99da", _rrdb(4, 6), None),
    ("RealESRGAN_x2plus", "v0.2.1",
     "49fafd45f8fd7aa8d31ab2a22d14d91b536c34494a5cfe31eb5d89c2fa266abb", _rrdb(2), None),
    ("realesr-animevideov3", "v0.2.5.0",
     "b8a8376811077954d82ca3fcf476f1ac3da3e8a68a4f4d71363008000a18b75d", _compact(16), None),
    ("realesr-general-x4v3", "v0.2.5.0",
     "8dc7edb9ac80ccdc30c3a5dca6616509367f05fbc184ad95b731f05bece96292", _compact(32),
     "realesr-general-wdn-x4v3"),
    ("realesr-general-wdn-x4v3", "v0.2.5.0",
     "1641f8c4464b9f097c9fdda5589273713f67cf59f3d909e0bd688f0cee269dca", _compact(32), None),
]
for _name, _tag, _sha, _spec, _partner in _REALESRGAN_FILES:
    PUBLISHED[_name] = Published(f"{_name}.pth", f"{_RE}{_tag}/{_name}.pth", _sha, _spec, _REAL,
                                 partner=_partner)

# SwinIR's official SR releases: (name, scale, kind, training patch, sha256)
_SWINIR_FILES = [
    ("001_classicalSR_DF2K_s64w8_SwinIR-M_x2", 2, "classical", 64,
     "2032ebf8f401dd3ce2fae5f3852117cb72101ec6ed8358faa64c2a3fa09ed4ac"),
    ("001_classicalSR_DF2K_s64w8_SwinIR-M_x3", 3, "classical", 64,
     "6eca3aee41f53322cd2f5a13650e212b80be8f3c0439d6fe19aef13ab1f509c7"),
    ("001_classicalSR_DF2K_s64w8_SwinIR-M_x4", 4, "classical", 64,
     "4e78e33f22c1aa8a773db0cf4a7381bae97c2362c717f155439ebc690cbd9215"),
    ("001_classicalSR_DF2K_s64w8_SwinIR-M_x8", 8, "classical", 64,
     "6b522c1ea5c21006ce3398797eb20b131ca0024cc6e7b8f3d5d29fad1310a49c"),
    ("001_classicalSR_DIV2K_s48w8_SwinIR-M_x2", 2, "classical", 48,
     "ac6d4895f73aa1b3d563937e29dcedcfdff4d401280e248f23db3c6f68e8343b"),
    ("001_classicalSR_DIV2K_s48w8_SwinIR-M_x3", 3, "classical", 48,
     "d835497f2332aae839ae19a033290ced8686fa2a795f76fc5153ec2c83003f75"),
    ("001_classicalSR_DIV2K_s48w8_SwinIR-M_x4", 4, "classical", 48,
     "129dc773ba2d4c07f3eb0bb116fbe692011b7cc072d9ca12797cd3748198610a"),
    ("001_classicalSR_DIV2K_s48w8_SwinIR-M_x8", 8, "classical", 48,
     "3c3ae9238a7125e52aab457df052aa8981adb2fb8e42b6d4112a96b3c19432d7"),
    ("002_lightweightSR_DIV2K_s64w8_SwinIR-S_x2", 2, "lightweight", 64,
     "193b229909ca89cd8b55de9c9e7fce146ae759d59dfcd78d8feb9dd1d6fa0fd7"),
    ("002_lightweightSR_DIV2K_s64w8_SwinIR-S_x3", 3, "lightweight", 64,
     "53af0cf0b15876752c1c2646a71444f739523b3d562e126d200521a817ab5d2c"),
    ("002_lightweightSR_DIV2K_s64w8_SwinIR-S_x4", 4, "lightweight", 64,
     "09fad24e32ae62722e1a055efde9921328f4137981bab0a42a4a3a806306c58e"),
    ("003_realSR_BSRGAN_DFO_s64w8_SwinIR-M_x2_GAN", 2, "real", 64,
     "f397408977a3e07eb06afb7238d453a12ef35ebab7328a54241f307860dbe342"),
    ("003_realSR_BSRGAN_DFO_s64w8_SwinIR-M_x4_GAN", 4, "real", 64,
     "b9afb61e65e04eb7f8aba5095d070bbe9af28df76acd0c9405aeb33b814bcfc6"),
    ("003_realSR_BSRGAN_DFOWMFC_s64w8_SwinIR-L_x4_GAN", 4, "large", 64,
     "99adfa91350a84c99e946c1eb3d8fce34bc28f57d807b09dc8fe40a316328c0a"),
]
for _name, _scale, _kind, _patch, _sha in _SWINIR_FILES:
    PUBLISHED[_name] = Published(f"{_name}.pth", f"{_SWINIR}{_name}.pth", _sha,
                                 _swinir(_scale, _kind, _patch),
                                 "https://github.com/JingyunLiang/SwinIR/releases/tag/v0.0")

# BasicSR's official EDSR conversions (scripts/download_pretrained_models.py: Google Drive ids;
# the file names end in the first 8 hex digits of the sha256)
for _scale, _large, _hash, _id in [
        (2, False, "3ba7b0861913de93740110738fb621410651897e391e8057b7b6104c4f999254",
         "1mREMGVDymId3NzIc2u90sl_X4-pb4ZcV"),
        (3, False, "6908f88a1be95e7112f480b7b1d9608ad83b4ffa0c227416a6376f6b036a77f3",
         "1EriqQqlIiRyPbrYGBbwr_FZzvb3iwqz5"),
        (4, False, "0c287733e70d1b8b8fc5885613ecbe451e5f3010bcae0307612ef5e4aa08dd5f",
         "1bCK6cFYU01uJudLgUUe-jgx-tZ3ikOWn"),
        (4, True, "76ee1c8f48813f46024bee8d2700f417f6b2db070e899954ff1552fbae343e93",
         "1GCi30YYCzgMCcgheGWGusP9aWKOAy5vl")]:
    _name = f"EDSR_{'L' if _large else 'M'}x{_scale}_f{256 if _large else 64}b" \
            f"{32 if _large else 16}_DIV2K_official"
    PUBLISHED[_name] = Published(f"{_name}-{_hash[:8]}.pth", _DRIVE + _id, _hash,
                                 _edsr(_scale, _large), _BASICSR_ZOO)

# BasicSR publishes these only in its Google Drive folders (no file id, no hash in the repository)
PUBLISHED["RCAN_BIX4-official"] = Published(
    "RCAN_BIX4-official.pth", None, None,
    {"type": "RCAN", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64, "num_group": 10,
     "num_block": 20, "squeeze_factor": 16, "res_scale": 1.0, "img_range": 255.0,
     "rgb_mean": [0.4488, 0.4371, 0.4040], "scale": 4},
    "https://drive.google.com/drive/folders/15DgDtfaLASQ3iAPJEVHQF49g9msexECG")
PUBLISHED["001_MSRResNet_x4_f64b16_DIV2K_1000k_B16G1_wandb"] = Published(
    "001_MSRResNet_x4_f64b16_DIV2K_1000k_B16G1_wandb.pth", None, None,
    {"type": "MSRResNet", "num_in_ch": 3, "num_out_ch": 3, "num_feat": 64, "num_block": 16,
     "scale": 4},
    "https://drive.google.com/drive/folders/1XN4WXKJ53KQ0Cu0Yv-uCt8DZWq6uufaP "
    "(models/net_g_1000000.pth)")

# Real-ESRGAN's -dn default: realesr-general-x4v3 blended half and half with its wdn partner
DENOISE_DEFAULT = 0.5


def get(name: str) -> tuple[str, Published]:
    """(name, entry) for a registry name, a release file's name or either without ".pth" (as
    Real-ESRGAN, `-n RealESRGAN_x4plus.pth` works), else a ValueError listing the names."""
    stem = name[:-4] if name.endswith(".pth") else name
    for key, entry in PUBLISHED.items():
        if stem in (key, entry.file[:-4]):
            return key, entry
    raise ValueError(f"-n {name}: not a published model srgrad knows (srgrad-infer --list-models "
                     f"lists them: {', '.join(PUBLISHED)})")


def cache_dir() -> Path:
    """$SRGRAD_HOME/models, else $XDG_CACHE_HOME/srgrad/models (default ~/.cache/srgrad/models)."""
    return srgrad_home("models")


def fetch(name: str, sha256: str | None = None, progress: bool = True, say=None) -> Path:
    """The checked file of a published model in the cache, downloaded on first use (resumable,
    with a progress bar). `sha256` (64 hex digits) is the hash to check against: required for an
    entry whose hash srgrad does not know, and it must agree with a known one. A cached file whose
    hash differs is an error naming it (it is left alone: it may be the user's)."""
    say = say or (lambda msg: print(msg, file=sys.stderr))
    key, entry = get(name)
    given = None if sha256 is None else check_sha256(sha256, "--sha256")
    if given and entry.sha256 and given != entry.sha256:
        raise ValueError(f"--sha256 {given} is not the sha256 of {entry.file}, {entry.sha256}")
    expected = given or entry.sha256
    path = cache_dir() / entry.file
    if path.is_file():
        return checked_cached(path, expected, key, say)
    if entry.url is None:
        raise DownloadError(f"-n {key}: the original project publishes {entry.file} only at "
                            f"{entry.page}: srgrad cannot download it. Download it by hand and "
                            f"save it as {path} (or pass --weights FILE)")
    if expected is None:
        raise DownloadError(f"-n {key}: srgrad knows no sha256 for {entry.file}, so it does not "
                            f"download it unchecked: pass --sha256 HEX (the hash you trust), or "
                            f"download {entry.url} yourself and pass --weights FILE")
    make_folder(path.parent, "the model cache (SRGRAD_HOME moves it)")
    say(f"downloading {key} from {entry.url} into {path}")
    return download(entry.url, path, expected, progress=progress, say=say)


# The pretrained files srgrad's perceptual metrics and losses read (framework/nn/lpips.py, dists.py),
# by their name in the cache: (official URL, sha256). torchvision's hashes start with the 8 hex digits
# of their file names (as torch.hub checks them); the full ones from projects that pin these files;
# lpips's and DISTS's from their PyPI wheels (lpips 0.1.4, DISTS-pytorch 0.1), which ship them.
_LPIPS_RAW = "https://github.com/richzhang/PerceptualSimilarity/raw/master/lpips/weights/v0.1/"
AUXILIARY = {
    "alexnet-owt-7be5be79.pth": ("https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
                                 "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02"),
    "vgg16-397923af.pth": ("https://download.pytorch.org/models/vgg16-397923af.pth",
                           "397923af8e79cdbb6a7127f12361acd7a2f83e06b05044ddf496e83de57a5bf0"),
    "lpips_v0.1_alex.pth": (_LPIPS_RAW + "alex.pth",
                            "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0"),
    "lpips_v0.1_vgg.pth": (_LPIPS_RAW + "vgg.pth",
                           "a78928a0af1e5f0fcb1f3b9e8f8c3a2a5a3de244d830ad5c1feddc79b8432868"),
    "DISTS_weights.pt": ("https://github.com/dingkeyan93/DISTS/raw/master/DISTS_pytorch/weights.pt",
                         "f5e65c96230b7f6ca995691647d482237e4cab8a50c5c4a5784f219ef0748218"),
}


def fetch_auxiliary(files, progress: bool = True, say=None) -> list[Path]:
    """Each named file of AUXILIARY in the model cache, checked (a cached one too) or downloaded;
    offline, the error names the URL and where to save the file by hand."""
    say = say or (lambda msg: print(msg, file=sys.stderr))
    out = []
    for name in dict.fromkeys(files):
        url, expected = AUXILIARY[name]
        path = cache_dir() / name
        if path.is_file():
            checked_cached(path, expected, name, say)
        else:
            make_folder(path.parent, "the model cache (SRGRAD_HOME moves it)")
            say(f"downloading {url} into {path}")
            download(url, path, expected, progress=progress, say=say)
        out.append(path)
    return out


def fetch_for(classes_and_specs, progress: bool = True, say=None) -> list[Path]:
    """The cached files that metrics or losses need: `classes_and_specs` is [(metric function or
    loss class, its spec dict)], each declaring `weight_files` (a tuple, or a function of the spec)."""
    files = []
    for owner, spec in classes_and_specs:
        declared = getattr(owner, "weight_files", ())
        files += list(declared(spec) if callable(declared) else declared)
    return fetch_auxiliary(files, progress, say) if files else []


def checked_cached(path: Path, expected: str | None, key: str, say) -> Path:
    """A file already in the cache: checked against `expected` (a mismatch is an error naming both
    hashes; the file is left alone: it may be the user's), or, with no hash known, used with a note."""
    if expected is None:
        say(f"note: {path} was put there by hand; srgrad knows no sha256 for {path.name} "
            f"(pass --sha256 to check it)")
        return path
    got = sha256_of(path)
    if got != expected:
        raise DownloadError(f"{path}: its sha256 is {got}, expected {expected} for {key}; delete it "
                            f"to download it again")
    return path


def denoise_blend(state: dict, partner: dict, strength: float) -> dict:
    """Real-ESRGAN's deep network interpolation (RealESRGANer.dni): every tensor strength * a +
    (1 - strength) * b, in the tensors' dtype (float32 products of float32 weights, as torch)."""
    if state.keys() != partner.keys():
        raise ValueError("-dn: the two weights files hold different tensors: "
                         f"{sorted(state.keys() ^ partner.keys())[:5]}")
    out = {}
    for k, a in state.items():
        b = partner[k]
        if a.shape != b.shape:
            raise ValueError(f"-dn: {k} has shape {a.shape} and {b.shape} in the two files")
        wa, wb = np.asarray(strength, a.dtype), np.asarray(1.0 - strength, a.dtype)
        out[k] = wa * a + wb * b
    return out


def listing() -> str:
    """The registry as srgrad-infer --list-models prints it (each model's size from its card)."""
    from ...card import card, has_card, short_count
    folder = cache_dir()
    rows = [("name", "model", "sha256", "cached"), ("", "", "", "")]
    for key, entry in PUBLISHED.items():
        spec = entry.spec
        model = f"{spec['type']} x{spec['scale']}"
        if has_card(spec["type"]):  # its size, from its card
            model += f" ({short_count(card(spec).parameters)})"
        sha = entry.sha256[:16] + "..." if entry.sha256 else "unknown"
        cached = "yes" if (folder / entry.file).is_file() else \
            ("no" if entry.url else "by hand")
        rows.append((key, model, sha, cached))
    width = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in rows]
    lines[1] = "  ".join("-" * w for w in width)
    return "\n".join(lines + ["", f"cache folder: {folder} (SRGRAD_HOME moves it); -n NAME "
                              f"downloads a file on first use, checked against its sha256"])


# -- the command-line options (srgrad-infer, -eval, -export) --------------------------------------
class _ListModels(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        print(listing())
        parser.exit()


def add_arguments(p) -> None:
    """-n/--model_name, --sha256, -dn/--denoise_strength and --list-models."""
    from ..commands.outputs import name_arg  # a file name in the cache and in srgrad-eval's outputs
    p.add_argument("-n", "--model-name", "--model_name", dest="model_name", metavar="NAME",
                   type=name_arg,
                   help="a published model by name, as Real-ESRGAN's -n (e.g. RealESRGAN_x4plus, "
                   "realesr-general-x4v3, 001_classicalSR_DF2K_s64w8_SwinIR-M_x4; --list-models "
                   "lists them): downloaded on first use into $SRGRAD_HOME/models (default "
                   "~/.cache/srgrad/models), resumable, checked against its sha256 before every "
                   "use. With --weights: that file, as this model")
    p.add_argument("--sha256", metavar="HEX", help="the sha256 the weights must have: checks "
                   "--weights, or lets -n download a file whose hash srgrad does not know")
    p.add_argument("-dn", "--denoise-strength", "--denoise_strength", dest="denoise_strength",
                   type=float, metavar="D", help="-n realesr-general-x4v3 only, as Real-ESRGAN: "
                   "D x realesr-general-x4v3 + (1 - D) x realesr-general-wdn-x4v3, weight by "
                   "weight (0: keep noise, 1: strong denoising, the x4v3 file alone; default "
                   f"{DENOISE_DEFAULT}, which downloads both files)")
    p.add_argument("--list-models", action=_ListModels, nargs=0,
                   help="print the published models srgrad runs (-n NAME) and exit")


def weights_from_args(args, workdir, progress: bool = True, say=None) -> tuple:
    """(weights path, model spec or None) for add_arguments' options and --weights. -n gives the
    spec and, without --weights, the cached (downloaded) file; -dn's blend is written as a weights
    file into `workdir`."""
    from ...io.config import ConfigError  # an argument problem: exit 2
    say = say or (lambda msg: print(msg, file=sys.stderr))
    # a command without add_arguments (srgrad-convert weights) has --weights alone
    weights, strength = args.weights, getattr(args, "denoise_strength", None)
    name, sha256 = getattr(args, "model_name", None), getattr(args, "sha256", None)
    try:
        given = None if sha256 is None else check_sha256(sha256, "--sha256")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if strength is not None and not 0.0 <= strength <= 1.0:
        raise ConfigError(f"-dn must be in [0, 1] (0: keep noise, 1: strong denoising), got "
                          f"{strength}")
    if weights is not None and given is not None:
        got = sha256_of(weights)
        if got != given:
            raise ValueError(f"--weights {weights}: its sha256 is {got}, not --sha256 {given}")
    if not name:
        if weights is None:
            raise ConfigError("give --weights FILE or -n NAME (srgrad-infer --list-models lists "
                              "the names)")
        if strength is not None:
            say("note: -dn applies to -n realesr-general-x4v3 only: ignored")
        return weights, None
    try:
        key, entry = get(name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    spec = dict(entry.spec)
    path = weights if weights is not None else fetch(key, given, progress, say)
    if entry.partner is None or strength == 1:
        if strength is not None and entry.partner is None:
            say(f"note: -dn applies to -n realesr-general-x4v3 only, not {key}: ignored")
        return path, spec
    strength = DENOISE_DEFAULT if strength is None else strength
    partner = fetch(entry.partner, None, progress, say) if weights is None \
        else _partner_beside(weights, key, entry.partner)
    from ...weights import load_weights, save_weights
    blended = denoise_blend(load_weights(path)[0], load_weights(partner)[0], strength)
    out = Path(workdir) / f"{key}-dn{strength:g}.safetensors"
    save_weights(out, blended, model=spec, scale=spec["scale"])
    say(f"-dn {strength:g}: {strength:g} x {key} + {1 - strength:g} x {entry.partner}, weight by "
        f"weight (-dn 1 runs {key} alone)")
    return out, spec


def _partner_beside(weights, key: str, partner: str) -> Path:
    """Real-ESRGAN's rule for -dn with a given file: the partner's name in place of the model's."""
    path = Path(str(weights).replace(key, partner))
    if path == Path(weights) or not path.is_file():
        raise ValueError(f"-dn with --weights {weights}: the {partner} weights are looked for as "
                         f"{path} (Real-ESRGAN's rule: the name with {key} replaced) and are not "
                         f"there; put them there, or pass -dn 1")
    return path
