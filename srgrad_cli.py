"""The installed commands (pyproject's [project.scripts]: srgrad-train, srgrad-infer, ...), each
run so that Ctrl-C never prints a traceback.

`import framework` loads numpy and numba, about a second on a cold machine, before a command's
first line runs: a Ctrl-C then would end in a KeyboardInterrupt traceback from deep inside an
import. So this module imports nothing from framework itself: each entry point imports its
command inside the guard (Ctrl-C there: `interrupted`, exit 130). And once a command has
returned, the interpreter still waits for its worker threads (a batch loader finishing its
batch): a second Ctrl-C or a SIGTERM then ends the process at once, quietly, with the command's
exit code, instead of a traceback from the threads' shutdown. (A signal in the first
milliseconds, while Python itself starts, is Python's.)
"""
import os
import signal
import sys

__all__ = ["train", "infer", "evaluate", "export", "convert", "prepare", "degrade", "precompile",
           "zssr", "run"]


def run(module: str, function: str) -> None:
    """Exit with `module.function()`'s code, the import and the call guarded (module docstring)."""
    try:
        command = _import(module, function)
        from framework import malloc
        malloc.tune()  # glibc's allocator for a training or inference process (framework/malloc.py)
        code = command()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 128 + signal.SIGINT
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code
    _exit(code)


def _import(module: str, function: str):
    """`module.function`, imported with Ctrl-C noted as it is raised: an import can turn the
    KeyboardInterrupt into another error (numpy's C import of `datetime` makes it an ImportError
    with a page of advice) or swallow it (a bare except), and either way the Ctrl-C was the cause:
    it is raised again once the import is over."""
    import importlib
    seen = []

    def noted(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (not a background job's SIG_IGN)
    if ours:
        signal.signal(signal.SIGINT, noted)
    try:
        command = getattr(importlib.import_module(module), function)
    except BaseException:
        if seen:
            raise KeyboardInterrupt from None
        raise
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if seen:
        raise KeyboardInterrupt
    return command


def _exit(code) -> None:
    status = 0 if code is None else code if isinstance(code, int) else 1

    def at_once(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)

    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # a background job ignores SIGINT
            signal.signal(signum, at_once)
    sys.exit(code)


def train():
    run("framework.engine.commands.cli", "train_main")


def infer():
    run("framework.engine.commands.cli", "infer_main")


def evaluate():
    run("framework.engine.commands.cli", "eval_main")


def export():
    run("framework.engine.commands.export", "main")


def convert():
    run("framework.engine.commands.convert", "main")


def prepare():
    run("framework.engine.commands.prepare", "main")


def degrade():
    run("framework.engine.commands.degrade", "main")


def precompile():
    run("framework.engine.run.precompile", "main")


def zssr():
    run("framework.engine.zeroshot.zssr", "main")
