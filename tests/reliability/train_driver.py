"""`srgrad-train` for the reliability tests, run as a subprocess: `python train_driver.py ARGS...`.

Test-only behaviour, switched by environment variables so production code carries no test hooks:
- SRGRAD_TEST_REPLACE_DELAY=SECONDS: sleep between writing a `*.tmp` file and `os.replace`-ing it
  over its target, so that a kill lands inside a checkpoint write as often as between writes;
  SRGRAD_TEST_REPLACE_ONLY=TEXT limits the delay to files whose path contains TEXT.
- matplotlib is hidden (the curve PNG is skipped): its import would dominate the start-up time.
"""
import os
import sys
import time

delay = float(os.environ.get("SRGRAD_TEST_REPLACE_DELAY", "0"))
only = os.environ.get("SRGRAD_TEST_REPLACE_ONLY", "")
if delay > 0:
    _replace = os.replace

    def slow_replace(src, dst, *args, **kwargs):
        if os.fspath(src).endswith(".tmp") and only in os.fspath(src):
            time.sleep(delay)
        return _replace(src, dst, *args, **kwargs)

    os.replace = slow_replace

sys.modules["matplotlib"] = None  # import matplotlib -> ImportError: plot_curves skips the PNG

from framework.engine.cli import train_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(train_main(sys.argv[1:]))
