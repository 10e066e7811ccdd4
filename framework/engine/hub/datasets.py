"""Data sets by name (`srgrad-eval --benchmark Set5 ...`, `srgrad-prepare --dataset DIV2K`): the
registry of the archives SR papers evaluate and train on, the folder they go to, fetch on first
use, and a safe extraction. The model registry's rules (engine/hub/models.py) hold here too: every archive
is checked against its sha256 before it is used (an entry whose hash no public source gives is
downloaded only against a hash the user passes), downloads resume, an archive is installed only once
complete, and offline the error names the URL and the path to put the file by hand.

The hashes: DIV2K's from tensorflow/datasets' url_checksums/div2k.txt (size and sha256 of every
DIV2K zip); EDSR's benchmark.tar (Set5, Set14, B100, Urban100 with their bicubic LR) from a project
that pins it (250,112,000 bytes); Flickr2K and DIV2KRK have no published sha256 (torchSR gives
Flickr2K.tar's md5 only: 5d3f39443d5e9489bff8963f8f26cb03). Manga109 is shared only on request
(its page): an entry that says where, and where to put the archive.

The folder: `$SRGRAD_HOME/datasets` when SRGRAD_HOME is set, else `$XDG_CACHE_HOME/srgrad/datasets`
(`~/.cache/srgrad/datasets`): `archives/<file>` and, beside it, `<archive stem>/` the archive's
content, extracted into a temporary folder and renamed into place when complete (a folder there
without srgrad's `.complete` marker is not used). Extraction takes regular files and folders only:
no absolute names, no `..`, no links or devices, at most MAX_MEMBERS members and an uncompressed
size of at most max(4 x the archive, 1 GiB).
"""
from __future__ import annotations

import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from ...io.download import DownloadError, check_sha256, download, srgrad_home
from .models import checked_cached

__all__ = ["Archive", "DataSet", "SETS", "get", "data_dir", "fetch", "folder_of", "listing",
           "ArchiveError"]

MAX_MEMBERS = 200_000
MAX_ARCHIVE = 32 << 30  # bytes, for an entry whose size no source gives (Flickr2K.tar is ~20 GB)
MARKER = ".complete"


class ArchiveError(ValueError):
    """An archive srgrad will not extract (the message says which member and why)."""


class Archive(NamedTuple):
    file: str  # the archive's name in the cache
    url: str | None  # None: only by hand (the entry's page says where)
    sha256: str | None  # None: no public source gives it (the user passes --sha256)
    size: int | None = None  # bytes, where a source gives it (the download's cap)


class DataSet(NamedTuple):
    archives: tuple  # Archive, ...
    folders: dict  # role -> folder inside the extracted archives ("hr", "lr_x2", ..., "hr_valid")
    page: str
    about: str
    aliases: tuple = ()


_DIV2K = "https://data.vision.ee.ethz.ch/cvl/DIV2K/"
_EDSR = "https://cv.snu.ac.kr/research/EDSR/"
_BENCHMARK = Archive("benchmark.tar", _EDSR + "benchmark.tar",
                     "80c21c333bbf6ceb5308b7243761f8284478274413a97b96f1d63e9045fd93e8", 250112000)
# DIV2K's zips: (file, size, sha256), from tensorflow/datasets' url_checksums/div2k.txt
_DIV2K_ZIPS = {
    "DIV2K_train_HR.zip": (3530603713, "9d0b9c463f6e35b6c62cc6a930ee2224f670b34c1df841a57670f9acf0f6c335"),
    "DIV2K_valid_HR.zip": (448993893, "20dd31fd84d777bc1cf5d6b7654a3f569c0aec74458ae094122ad1d0489900fc"),
    "DIV2K_train_LR_bicubic_X2.zip": (925390592, "a53a424317575838dadce4bcd97cf7b744d6855f43740ed5f0245af3cf4bd850"),
    "DIV2K_train_LR_bicubic_X3.zip": (427847282, "ad5c8e5507e2765823d3c2c5bd0934842efcd487c5370604c224090898b3163a"),
    "DIV2K_train_LR_bicubic_X4.zip": (246914039, "f006b837f4eb52b82909aa01478e6d6d199eefce932179491d0c9dbb706dde3a"),
    "DIV2K_valid_LR_bicubic_X2.zip": (117763600, "60eed9875c697df51204aa579e2a699e1d5215095788a097ff54dd17e2664d57"),
    "DIV2K_valid_LR_bicubic_X3.zip": (54513392, "04b9a2ed3b4a0715d3924d3ae8514830c3328fac8d30512ce716d6f419e052a3"),
    "DIV2K_valid_LR_bicubic_X4.zip": (31505881, "a50a5d1c4b88de4e8d300d8fb2b904c52fe93b2b298a4899697760d7cbb6d553"),
}


def _div2k(name: str) -> Archive:
    size, sha = _DIV2K_ZIPS[name]
    return Archive(name, _DIV2K + name, sha, size)


def _benchmark(name: str, about: str, aliases=()) -> DataSet:
    folders = {"hr": f"benchmark/benchmark/{name}/HR"}
    folders.update({f"lr_x{s}": f"benchmark/benchmark/{name}/LR_bicubic/X{s}" for s in (2, 3, 4)})
    return DataSet((_BENCHMARK,), folders, "https://github.com/sanghyun-son/EDSR-PyTorch", about, aliases)


SETS: dict[str, DataSet] = {
    "Set5": _benchmark("Set5", "5 images (Bevilacqua et al. 2012); EDSR's benchmark.tar"),
    "Set14": _benchmark("Set14", "14 images (Zeyde et al. 2010); EDSR's benchmark.tar"),
    "B100": _benchmark("B100", "100 BSD300 test images (Martin et al. 2001); EDSR's benchmark.tar",
                       aliases=("BSD100", "BSDS100")),
    "Urban100": _benchmark("Urban100", "100 urban scenes (Huang et al. 2015); EDSR's benchmark.tar"),
    "Manga109": DataSet(
        (Archive("Manga109.zip", None, None),), {"hr": "Manga109/Manga109"},
        "http://www.manga109.org/en/download.html",
        "109 manga volumes (Matsui et al. 2017), one image each: shared on request for academic "
        "use; save a zip of the 109 PNG images in a folder Manga109/ as archives/Manga109.zip"),
    "DIV2K": DataSet(
        tuple(_div2k(f) for f in _DIV2K_ZIPS),
        {"hr": "DIV2K_train_HR/DIV2K_train_HR", "hr_valid": "DIV2K_valid_HR/DIV2K_valid_HR",
         **{f"lr_x{s}": f"DIV2K_train_LR_bicubic_X{s}/DIV2K_train_LR_bicubic/X{s}" for s in (2, 3, 4)},
         **{f"lr_valid_x{s}": f"DIV2K_valid_LR_bicubic_X{s}/DIV2K_valid_LR_bicubic/X{s}" for s in (2, 3, 4)}},
        "https://data.vision.ee.ethz.ch/cvl/DIV2K/",
        "800 train + 100 valid 2K images (Agustsson and Timofte 2017) and their bicubic LR x2-x4"),
    "Flickr2K": DataSet(
        (Archive("Flickr2K.tar", _EDSR + "Flickr2K.tar", None),),
        {"hr": "Flickr2K/Flickr2K/Flickr2K_HR",
         **{f"lr_x{s}": f"Flickr2K/Flickr2K/Flickr2K_LR_bicubic/X{s}" for s in (2, 3, 4)}},
        "https://github.com/limbee/NTIRE2017",
        "2650 2K images (Lim et al. 2017), ~20 GB; no published sha256 (md5 5d3f39443d5e9489bff8963f8f26cb03)"),
    "DIV2KRK": DataSet(
        (Archive("DIV2KRK_public.zip", "https://www.wisdom.weizmann.ac.il/~vision/kernelgan/DIV2KRK_public.zip",
                 None),),
        {}, "https://github.com/sefibk/KernelGAN",
        "100 DIV2K valid images with random anisotropic Gaussian kernels (Bell-Kligler et al. 2019); "
        "no published sha256; its folders as the archive has them"),
}


def get(name: str) -> tuple[str, DataSet]:
    """(name, entry) for a registry name or alias, any case; else a ValueError listing them."""
    for key, entry in SETS.items():
        if name.lower() in (key.lower(), *(a.lower() for a in entry.aliases)):
            return key, entry
    raise ValueError(f"{name!r} is not a data set srgrad knows (known: {', '.join(SETS)})")


def data_dir() -> Path:
    """$SRGRAD_HOME/datasets, else $XDG_CACHE_HOME/srgrad/datasets (~/.cache/srgrad/datasets)."""
    return srgrad_home("datasets")


def _archive_file(key: str, archive: Archive, sha256, progress, say) -> Path:
    """The checked archive in the cache, downloaded on first use."""
    expected = sha256 or archive.sha256
    path = data_dir() / "archives" / archive.file
    if path.is_file():
        return checked_cached(path, expected, key, say)
    if archive.url is None:
        raise DownloadError(f"{key}: {archive.file} is shared only through {SETS[key].page}: srgrad "
                            f"cannot download it. Get it there and save it as {path}")
    if expected is None:
        raise DownloadError(f"{key}: srgrad knows no sha256 for {archive.file}, so it does not "
                            f"download it unchecked: pass --sha256 HEX (the hash you trust), or "
                            f"download {archive.url} yourself and save it as {path}")
    say(f"downloading {key}'s {archive.file} from {archive.url} into {path}")
    return download(archive.url, path, expected, progress=progress, say=say,
                    max_bytes=archive.size or MAX_ARCHIVE)


def _members(handle, kind: str, limit: int, where: Path):
    """[(name, is_dir, member)] of a tar or zip, every member checked (module docstring)."""
    items = handle.getmembers() if kind == "tar" else handle.infolist()
    if len(items) > MAX_MEMBERS:
        raise ArchiveError(f"{where}: {len(items)} members, more than srgrad extracts ({MAX_MEMBERS})")
    total, out = 0, []
    for m in items:
        name = m.name if kind == "tar" else m.filename
        parts = PurePosixPath(name).parts
        if not parts or name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise ArchiveError(f"{where}: member {name!r} would be written outside the folder")
        if kind == "tar":
            if not (m.isfile() or m.isdir()):
                raise ArchiveError(f"{where}: member {name!r} is a link or device; srgrad extracts "
                                   f"regular files and folders only")
            is_dir, size = m.isdir(), m.size
        else:
            mode = (m.external_attr >> 16) & 0o170000
            if mode and mode not in (0o100000, 0o040000):
                raise ArchiveError(f"{where}: member {name!r} is a link or device; srgrad extracts "
                                   f"regular files and folders only")
            is_dir, size = m.is_dir(), m.file_size
        total += size
        if total > limit:
            raise ArchiveError(f"{where}: its members hold more than {limit} bytes uncompressed "
                               f"(srgrad's limit for this archive)")
        out.append((PurePosixPath(*parts), is_dir, m))
    return out


def extract(archive: Path, dest: Path) -> Path:
    """`archive` (tar or zip) extracted into `dest` (absent), through `<dest>.extracting-<pid>`
    renamed when complete; returns dest."""
    tmp = dest.with_name(f"{dest.name}.extracting-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    limit = max(4 * archive.stat().st_size, 1 << 30)
    kind = "zip" if zipfile.is_zipfile(archive) else "tar"
    try:
        opened = zipfile.ZipFile(archive) if kind == "zip" else tarfile.open(archive)
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(f"{archive}: not a readable tar or zip archive ({exc})") from None
    try:
        with opened as handle:
            for rel, is_dir, member in _members(handle, kind, limit, archive):
                target = tmp.joinpath(*rel.parts)
                if is_dir:
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = handle.extractfile(member) if kind == "tar" else handle.open(member)
                with src, open(target, "xb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
        (tmp / MARKER).write_text(archive.name + "\n")
        try:
            os.replace(tmp, dest)
        except OSError:
            if not (dest / MARKER).is_file():  # else another process finished first: use its copy
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def fetch(name: str, sha256: str | None = None, progress: bool = True, say=None) -> tuple[str, Path]:
    """(name, root): every archive of the set in the cache (downloaded and checked on first use)
    and extracted beside it; root is the data folder (`folder_of` gives each role's folder).
    `sha256` checks an entry of one archive whose hash srgrad does not know."""
    say = say or (lambda msg: print(msg, file=sys.stderr))
    key, entry = get(name)
    given = None if sha256 is None else check_sha256(sha256, "--sha256")
    if given and len(entry.archives) > 1:
        raise ValueError(f"--sha256 checks one archive; {key} has {len(entry.archives)}")
    if given and entry.archives[0].sha256 and given != entry.archives[0].sha256:
        raise ValueError(f"--sha256 {given} is not the sha256 of {entry.archives[0].file}, "
                         f"{entry.archives[0].sha256}")
    root = data_dir()
    for archive in entry.archives:
        dest = root / Path(archive.file).stem
        if (dest / MARKER).is_file():
            continue
        path = _archive_file(key, archive, given, progress, say)
        if dest.exists():
            raise ArchiveError(f"{dest} exists but is not a complete extraction of {archive.file} "
                               f"(no {MARKER}): move it away, then run again")
        say(f"extracting {path} into {dest}")
        extract(path, dest)
    return key, root


def folder_of(name: str, role: str = "hr") -> Path:
    """The folder of `role` ("hr", "lr_x2", "hr_valid", ...) of a fetched set; a ValueError when the
    set has no such folder (its roles listed) or the archive holds none there."""
    key, entry = get(name)
    if role not in entry.folders:
        known = ", ".join(entry.folders) or "none: use its folders as the archive has them"
        raise ValueError(f"{key} has no {role!r} folder (srgrad knows: {known})")
    path = data_dir() / entry.folders[role]
    if not path.is_dir():
        raise ArchiveError(f"{key}: {path} is missing: the archive does not hold the layout srgrad "
                           f"expects ({entry.folders[role]})")
    return path


def listing() -> str:
    """The registry, one line a set: name, archives, whether srgrad can check them, page."""
    lines = [f"data sets (folder: {data_dir()}):"]
    for key, entry in SETS.items():
        files = ", ".join(a.file for a in entry.archives)
        how = ("by hand" if any(a.url is None for a in entry.archives) else
               "needs --sha256" if any(a.sha256 is None for a in entry.archives) else "checked")
        lines.append(f"  {key:<10} {files} [{how}] {entry.about}")
    return "\n".join(lines)
