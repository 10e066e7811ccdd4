"""Thin command line: see `python scripts/evaluate.py --help` (same as `srgrad-eval`)."""
import sys

from framework.engine.cli import eval_main

if __name__ == "__main__":
    sys.exit(eval_main())
