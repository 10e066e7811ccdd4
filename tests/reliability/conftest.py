"""srgrad-train run as a subprocess (through train_driver.py) for the process-level reliability tests;
the tiny images and configs are tests/conftest.py's."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "train_driver.py"


def driver_env(**extra):
    env = dict(os.environ)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_train(args, **env):
    """Popen of srgrad-train (through train_driver.py) with stdout/stderr captured."""
    return subprocess.Popen([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                            cwd=REPO, env=driver_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_train(args, timeout=120, **env):
    """Run srgrad-train to the end: CompletedProcess with text stdout/stderr."""
    return subprocess.run([sys.executable, str(DRIVER), *map(str, args), "--no-progress"],
                          cwd=REPO, env=driver_env(**env), capture_output=True, text=True,
                          timeout=timeout)
