"""Imported by `srgrad_cli.run("tests.reliability.starting", "main")` inside the entry point's
Ctrl-C guard, for test_interrupts' signal-at-start tests: writes `ready` to stderr, then imports
srgrad-train's module (numpy, numba: the second in which a Ctrl-C used to end in a traceback) and
hands over to it. Never collected by pytest."""
import sys

sys.stderr.write("ready\n")
sys.stderr.flush()

from framework.engine.commands.cli import train_main as main  # noqa: E402,F401
