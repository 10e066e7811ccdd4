"""Imported by `srgrad_cli.run("tests.reliability.starting_lost", "main")` in test_interrupts: a
Ctrl-C during an import that does not let it through, as numpy's C import of `datetime` did (its
PyCapsule_Import turned the KeyboardInterrupt into an ImportError), or as a bare except would
(SRGRAD_TEST_SWALLOW=1). `main` says it ran. Never collected by pytest."""
import os
import signal
import sys

try:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(10000):  # the handler runs between two bytecodes here
        pass
except BaseException:
    if os.environ.get("SRGRAD_TEST_SWALLOW") != "1":
        raise ImportError('PyCapsule_Import could not import module "datetime"') from None


def main():
    print("ran", file=sys.stderr)
    return 0
