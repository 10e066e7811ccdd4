"""`srgrad-train` for the reliability tests, run as a subprocess: `python train_driver.py ARGS...`
(through srgrad_cli, the installed command's entry point).

Test-only behaviour, switched by environment variables so production code carries no test hooks:
- SRGRAD_TEST_REPLACE_DELAY=SECONDS: sleep between writing a `*.tmp` file and `os.replace`-ing it
  over its target, so that a kill lands inside a checkpoint write as often as between writes;
  SRGRAD_TEST_REPLACE_ONLY=TEXT limits the delay to files whose path contains TEXT.
- SRGRAD_TEST_LOAD_DELAY=SECONDS: every training batch takes that much longer to load (the batch
  loader's threads are then busy when the process exits).
- matplotlib is hidden (the curve PNG is skipped): its import would dominate the start-up time.
"""
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository

delay = float(os.environ.get("SRGRAD_TEST_REPLACE_DELAY", "0"))
only = os.environ.get("SRGRAD_TEST_REPLACE_ONLY", "")
if delay > 0:
    _replace = os.replace

    def slow_replace(src, dst, *args, **kwargs):
        if os.fspath(src).endswith(".tmp") and only in os.fspath(src):
            time.sleep(delay)
        return _replace(src, dst, *args, **kwargs)

    os.replace = slow_replace

load_delay = float(os.environ.get("SRGRAD_TEST_LOAD_DELAY", "0"))
if load_delay > 0:
    from framework.data.loader import BatchLoader
    _get_batch = BatchLoader.get_batch

    def slow_get_batch(self, *args, **kwargs):
        time.sleep(load_delay)
        return _get_batch(self, *args, **kwargs)

    BatchLoader.get_batch = slow_get_batch

sys.modules["matplotlib"] = None  # import matplotlib -> ImportError: plot_curves skips the PNG

import srgrad_cli  # noqa: E402

if __name__ == "__main__":
    srgrad_cli.train()
