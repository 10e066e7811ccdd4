"""`srgrad-prepare`: the command. Sub-images and their bicubic LR from a folder of HR images
(framework/data/prepare.py does the work and documents the layout), or from a data set srgrad
fetches by name:

    srgrad-prepare --input HR_DIR --output OUT_DIR [...]
    srgrad-prepare --dataset DIV2K --output OUT_DIR [--sha256 HEX] [...]

`--dataset NAME` downloads and checks the set's archives on first use (engine/hub/datasets.py: the
cache under $SRGRAD_HOME/datasets) and takes its training HR folder as the input (DIV2K: the 800
train images; Flickr2K: its 2650).
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv=None) -> int:
    from ...data import prepare
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--dataset")
    p.add_argument("--sha256")
    p.add_argument("--no-progress", action="store_true")
    known, rest = p.parse_known_args(argv)
    if known.dataset is None:
        if known.sha256:
            print("error: --sha256 goes with --dataset", file=sys.stderr)
            return 2
        return prepare.main(argv)
    if "--input" in rest or any(a.startswith("--input=") for a in rest):
        print("error: give --input HR_DIR or --dataset NAME, not both", file=sys.stderr)
        return 2
    from ...io.download import DownloadError
    from ..hub import datasets as datahub
    from ..hub.datasets import ArchiveError
    try:
        key, _ = datahub.fetch(known.dataset, known.sha256, progress=not known.no_progress)
        hr = datahub.folder_of(key, "hr")
    except (ValueError, ArchiveError) as exc:
        print(f"error: --dataset: {exc}", file=sys.stderr)
        return 2
    except (DownloadError, OSError) as exc:
        print(f"error: --dataset: {exc}", file=sys.stderr)
        return 1
    print(f"{key}: HR images in {hr}", file=sys.stderr)
    return prepare.main(["--input", str(hr), *rest] + (["--no-progress"] if known.no_progress else []))
