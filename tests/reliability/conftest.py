"""srgrad-train run as a subprocess (through train_driver.py) for the process-level reliability tests;
the tiny images and configs are tests/conftest.py's."""
import os
import pathlib
import signal
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "train_driver.py"


def driver_env(**extra):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def as_in_a_terminal():
    """A child's SIGINT as in a terminal, even when the suite runs as a background job (which
    starts its processes with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_train(args, **env):
    """Popen of srgrad-train (through train_driver.py) with stdout/stderr captured."""
    return subprocess.Popen([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                            cwd=REPO, env=driver_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_in_a_terminal)


def run_train(args, timeout=120, **env):
    """Run srgrad-train to the end: CompletedProcess with text stdout/stderr."""
    return subprocess.run([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                          cwd=REPO, env=driver_env(**env), capture_output=True, text=True,
                          timeout=timeout)
