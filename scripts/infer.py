"""Thin command line: see `python scripts/infer.py --help` (same as `srgrad-infer`)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # srgrad_cli's folder
from srgrad_cli import infer  # noqa: E402  (imports the command inside its Ctrl-C guard)

if __name__ == "__main__":
    infer()
