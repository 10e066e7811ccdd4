"""Thin command line: see `python scripts/train.py --help` (same as `srgrad-train`)."""
import sys

from framework.engine.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main())
