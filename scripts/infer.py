"""Thin command line: see `python scripts/infer.py --help` (same as `srgrad-infer`)."""
import sys

from framework.engine.cli import infer_main

if __name__ == "__main__":
    sys.exit(infer_main())
