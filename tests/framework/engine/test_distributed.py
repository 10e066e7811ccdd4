"""framework.engine.run.distributed: launch detection, thread defaults, the flat gradient buffer and its one
Allreduce, the install hint; and real 2-rank training under mpirun (skipped without mpirun or
mpi4py)."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import framework as sg
from framework import nn
from framework.engine.run import distributed
from framework.engine.run.distributed import DistributedError, FlatGradients, MPICommunicator, SingleProcess

REPO = pathlib.Path(__file__).resolve().parents[3]
WORKER = REPO / "tests" / "framework" / "engine" / "mpi_worker.py"
LAUNCH_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SRGRAD_DISTRIBUTED")


@pytest.fixture
def plain_env(monkeypatch):
    """As if launched by plain `python`, whatever launched pytest."""
    for name in LAUNCH_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- launch detection and threads -------------------------------------------------------------
@pytest.mark.parametrize("env, launched, size", [
    ({}, False, None),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1"}, True, 4),
    ({"PMI_SIZE": "3", "PMI_RANK": "0"}, True, 3),
    ({"PMIX_RANK": "0"}, True, None),
])
def test_launch_detection(env, launched, size):
    assert distributed.is_mpi_launch(env) is launched
    assert distributed.launch_world_size(env) == size


def test_default_threads_divide_cores_between_local_ranks():
    cores = os.cpu_count()
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    assert distributed.default_threads({}) is None
    one = {"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    assert distributed.default_threads(one) == min(allowed, cores)
    crowded = {"OMPI_COMM_WORLD_SIZE": "512", "OMPI_COMM_WORLD_LOCAL_SIZE": "512"}
    assert distributed.default_threads(crowded) == 1
    hydra = {"PMI_SIZE": "2", "MPI_LOCALNRANKS": "2"}
    assert distributed.default_threads(hydra) == max(1, min(allowed, cores // 2))


def test_configure_threads_keeps_explicit_user_settings():
    env = {"OMPI_COMM_WORLD_SIZE": "512", "OMPI_COMM_WORLD_LOCAL_SIZE": "512",
           "NUMBA_NUM_THREADS": "3", "OMP_NUM_THREADS": "3"}
    assert distributed.configure_threads(env) == 1
    assert env["NUMBA_NUM_THREADS"] == "3" and env["OMP_NUM_THREADS"] == "3"
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    assert distributed.configure_threads({}) is None


def test_configure_threads_warns_when_mpirun_binds_a_rank_to_one_core(monkeypatch, capsys):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    env = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
           "OMPI_COMM_WORLD_RANK": "0", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    assert distributed.configure_threads(env) == 1
    assert "mpirun bound this rank to 1 core(s) of the 4 it could use: add --bind-to none" in \
        capsys.readouterr().err
    env["OMPI_COMM_WORLD_RANK"] = "1"  # said once, by rank 0
    distributed.configure_threads(env)
    assert capsys.readouterr().err == ""


# -- choosing the communicator ----------------------------------------------------------------
def test_plain_launch_is_single_process(plain_env):
    comm = distributed.init()
    assert isinstance(comm, SingleProcess)
    assert (comm.rank, comm.world_size, comm.is_root) == (0, 1, True)
    assert isinstance(distributed.init("none"), SingleProcess)
    plain_env.setenv("SRGRAD_DISTRIBUTED", "none")
    plain_env.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert isinstance(distributed.init(), SingleProcess)


@pytest.mark.parametrize("mode", ["mpl", "MPI"])
def test_unknown_mode_is_an_error(plain_env, mode):
    with pytest.raises(DistributedError, match=rf"--distributed '{mode}': expected one of auto, "
                                               rf"mpi, none"):
        distributed.init(mode)
    plain_env.setenv("SRGRAD_DISTRIBUTED", "yes")
    with pytest.raises(DistributedError, match="SRGRAD_DISTRIBUTED='yes': expected one of"):
        distributed.init()


HINT = r"pip install 'srgrad\[mpi\]'.*apt-get install openmpi-bin libopenmpi-dev"


def test_mpi_requested_without_mpi4py_says_how_to_install(plain_env):
    plain_env.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(DistributedError, match=r"requested \(--distributed mpi\).*" + HINT):
        distributed.init("mpi")
    plain_env.setenv("SRGRAD_DISTRIBUTED", "mpi")
    with pytest.raises(DistributedError, match=r"SRGRAD_DISTRIBUTED=mpi.*" + HINT):
        distributed.init()


def test_train_command_line_says_how_to_install(plain_env, capsys):
    from framework.engine.commands.cli import train_main
    plain_env.setitem(sys.modules, "mpi4py", None)
    assert train_main(["unused.yaml", "--distributed", "mpi"]) == 2
    assert re.search(r"error: MPI training was requested \(--distributed mpi\).*" + HINT,
                     capsys.readouterr().err)


def test_mpirun_without_mpi4py(plain_env):
    plain_env.setitem(sys.modules, "mpi4py", None)
    # several ranks that each trained alone would overwrite one run folder: refuse
    plain_env.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(DistributedError, match="started by mpirun with 2 ranks.*" + HINT):
        distributed.init()
    # a world of one is just a single process
    plain_env.setenv("OMPI_COMM_WORLD_SIZE", "1")
    assert isinstance(distributed.init(), SingleProcess)


def test_single_process_collectives_are_noops():
    comm = SingleProcess()
    buf = np.arange(4.0)
    assert comm.allreduce_mean_(buf) is buf and buf.tolist() == [0, 1, 2, 3]
    model = nn.Conv2d(1, 2, 3)
    before = model.weight.data.copy()
    comm.broadcast_params(model)
    assert comm.average_gradients_(model.parameters(), 0.25) == 0.25
    comm.check_same(3, "anything")
    comm.barrier()
    assert np.array_equal(model.weight.data, before)
    with pytest.raises(SystemExit, match="srgrad: boom"):
        comm.abort("boom")


# -- the flat buffer and its single Allreduce ---------------------------------------------------
def _model_with_grads(dtype=np.float64):
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 1, 1)).to(dtype)
    x = sg.tensor(np.random.default_rng(0).standard_normal((2, 2, 5, 4)), dtype=dtype)
    model(x).sum().backward()
    return model


def test_flat_gradients_pack_and_unpack():
    model = _model_with_grads()
    params = list(model.parameters())
    params[1].grad = None  # an unused parameter: packs as zeros, stays None
    flat = FlatGradients(params)
    # every gradient, then one slot for the loss
    assert flat.buffer.shape == (sum(p.numel() for p in params) + 1,)
    assert flat.buffer.dtype == np.float64
    expected = np.concatenate([np.zeros(p.numel()) if p.grad is None else p.grad.data.ravel()
                               for p in params] + [[0.5]])
    assert np.array_equal(flat.pack([0.5]), expected)
    flat.buffer *= 3
    assert flat.unpack() == [1.5]
    assert params[1].grad is None
    got = np.concatenate([np.zeros(p.numel()) if p.grad is None else p.grad.data.ravel()
                          for p in params])
    assert np.array_equal(got, 3 * expected[:-1])


def test_flat_gradients_need_one_dtype():
    model = _model_with_grads()
    model[2].weight.data = model[2].weight.data.astype(np.float32)
    with pytest.raises(DistributedError, match=r"one dtype.*\['float32', 'float64'\]"):
        FlatGradients(model.parameters())


class _FakeMPI:
    """Stands in for mpi4py.MPI: K ranks that computed the same gradients, so SUM = K * local."""
    IN_PLACE, SUM = object(), object()

    def __init__(self, size):
        self.COMM_WORLD = self
        self.size, self.calls = size, []

    def Get_rank(self):
        return 0

    def Get_size(self):
        return self.size

    def Allreduce(self, sendbuf, recvbuf, op):
        assert sendbuf is self.IN_PLACE and op is self.SUM
        self.calls.append(recvbuf.size)
        recvbuf *= recvbuf.dtype.type(self.size)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_average_gradients_is_one_allreduce_per_step(dtype):
    model = _model_with_grads(dtype)
    params = list(model.parameters())
    local = [p.grad.data.copy() for p in params]
    fake = _FakeMPI(size=3)
    comm = MPICommunicator(fake)
    assert comm.average_gradients_(model.parameters(), 0.75) == 0.75
    (buffer,) = [f.buffer for f in comm._flats.values()]
    comm.average_gradients_(model.parameters())  # the buffer is reused, not reallocated
    assert [f.buffer for f in comm._flats.values()] == [buffer]
    # one call per step carries every parameter's gradient and the loss
    assert fake.calls == [sum(p.numel() for p in params) + 1] * 2
    for p, g in zip(params, local):
        assert p.grad.data.dtype == dtype
        np.testing.assert_allclose(p.grad.data, g, rtol=1e-6)
    # several loss terms (a GAN's) travel in the same call, as a list back
    assert comm.average_gradients_(params[:2], [0.25, 2.0]) == [0.25, 2.0]
    assert fake.calls[-1] == params[0].data.size + params[1].data.size + 2
    assert comm.allreduce_seconds > 0


class _FakeMaxMPI(_FakeMPI):
    """Two ranks for check_same: the other rank holds `other`."""
    MAX = object()

    def __init__(self, other):
        super().__init__(2)
        self.other = other

    def Allreduce(self, sendbuf, recvbuf, op):
        assert sendbuf is self.IN_PLACE and op is self.MAX
        np.maximum(recvbuf, np.array([self.other, -self.other]), out=recvbuf)


def test_check_same_stops_ranks_that_disagree():
    MPICommunicator(_FakeMaxMPI(other=300)).check_same(300, "the iteration to resume at")
    with pytest.raises(DistributedError, match=r"ranks disagree on the iteration to resume at "
                                               r"\(from 0 to 300; rank 0 has 0\).*shared "
                                               r"filesystem"):
        MPICommunicator(_FakeMaxMPI(other=300)).check_same(0, "the iteration to resume at")


def test_allreduce_mean_rejects_non_contiguous_buffers():
    comm = MPICommunicator(_FakeMPI(2))
    with pytest.raises(TypeError, match="C-contiguous float"):
        comm.allreduce_mean_(np.zeros((4, 4))[:, 1])
    with pytest.raises(TypeError, match="C-contiguous float"):
        comm.allreduce_mean_(np.zeros(4, dtype=np.int64))


# -- real runs under mpirun --------------------------------------------------------------------
def _mpi_skip_reason():
    return distributed.unavailable_reason()


needs_mpi = pytest.mark.skipif(_mpi_skip_reason() is not None, reason=str(_mpi_skip_reason()))

CONFIG = """\
name: dp
scale: 2
seed: 3
dtype: float64
run_root: {root}
model: {{type: FSRCNN, d: 8, s: 4, m: 1}}
datasets:
  train: {{type: HRImageDataset, root: {images}, gt_size: 8}}
train:
  total_iters: 5
  batch_size: 8
  optimizer: {{type: Adam, lr: 0.01}}
  log_every: 1
checkpoint: {{every: 1, keep: 10}}
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny image folder, the config, and the single-process reference run (batch 8, 5 steps)."""
    from framework.engine.run.trainer import Trainer
    from framework.engine.config.schema import load_config
    from framework.io.image import write_image
    root = tmp_path_factory.mktemp("dp")
    images = root / "images"
    images.mkdir()
    rng = np.random.default_rng(7)
    for i in range(3):
        smooth = np.cumsum(np.cumsum(rng.uniform(0, 1, (3, 20, 18)), 1), 2)
        write_image(images / f"img{i}.png", smooth / smooth.max())
    config = root / "dp.yaml"
    config.write_text(CONFIG.format(root=root / "runs", images=images))
    ref = Trainer(load_config(config, ["name=reference"]), progress=False)
    ref.fit()
    flat = np.concatenate([p.data.ravel() for p in ref.model.parameters()])
    initial = Trainer(load_config(config, ["name=unused"]), progress=False).model
    init_flat = np.concatenate([p.data.ravel() for p in initial.parameters()])
    return {"root": root, "config": config, "reference": flat, "initial": init_flat}


def _mpirun(config, out_dir, *extra, timeout=90):
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "--allow-run-as-root", sys.executable,
           str(WORKER), str(config), str(out_dir), *extra]
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.pop(name, None)  # let the ranks pick their defaults (what the test checks)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _wait_for_lock_owner_to_die(run, seconds=20):
    """mpirun may return while the killed rank 0 is still being torn down (its run lock then looks
    alive for a moment): a user resumes later, the test waits for the process to be gone."""
    lock = run / ".lock"
    if not lock.exists():
        return
    pid = int(lock.read_text().split()[0])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"rank 0 (pid {pid}) still alive {seconds} s after mpirun returned")


def _set_name(setup, name):
    path = setup["root"] / f"{name}.yaml"
    path.write_text(setup["config"].read_text().replace("name: dp", f"name: {name}"))
    return path


@pytest.fixture(scope="module")
def two_ranks(setup, tmp_path_factory):
    """The 2-rank run of the same config (global batch 8 = 2 x 4, 5 steps): its output folder."""
    out = tmp_path_factory.mktemp("two_ranks")
    proc = _mpirun(_set_name(setup, "two"), out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@needs_mpi
def test_two_ranks_equal_one_process_and_each_other(setup, two_ranks):
    tmp_path = two_ranks
    w0, w1 = np.load(tmp_path / "rank0.npy"), np.load(tmp_path / "rank1.npy")
    assert w0.dtype == np.float64
    assert w0.tobytes() == w1.tobytes()  # identical on every rank, bit for bit
    assert np.abs(w0 - setup["initial"]).max() > 1e-3  # training moved the weights
    np.testing.assert_allclose(w0, setup["reference"], rtol=0, atol=1e-5)
    info = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # ... and after every step (a hash of each rank's weights after each optimizer step)
    assert len(info[0]["step_hashes"]) == 5 and info[0]["step_hashes"] == info[1]["step_hashes"]
    for rank_info in info:
        assert rank_info["world_size"] == 2 and rank_info["reductions"] == 5
        # each rank runs cores // 2 numba threads (1 on a 2-core machine), not all the cores
        assert rank_info["numba_threads"] == rank_info["default_threads"]
        assert rank_info["default_threads"] <= max(1, os.cpu_count() // 2)
    # rank 0 alone wrote the run folder: one metrics row per iteration, not one per rank
    run = setup["root"] / "runs" / "two"
    rows = (run / "metrics.csv").read_text().strip().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert (run / "net_latest.safetensors").is_file()


@needs_mpi
@pytest.mark.parametrize("how, message, resume_ranks", [
    pytest.param("exit", r"exited on signal|non-zero (exit code|status)", 1, id="exits"),
    pytest.param("raise", r"srgrad: rank 1/2: RuntimeError: injected failure at reduction 3; "
                          r"aborting all ranks", 2, id="raises"),
])
def test_a_dying_rank_ends_the_job_and_the_checkpoint_survives(setup, two_ranks, tmp_path, how,
                                                               message, resume_ranks):
    from framework.engine.run.trainer import Trainer, find_latest_checkpoint
    from framework.weights import checkpoint as ckpt
    from framework.engine.config.schema import load_config
    name = f"dies_{how}"
    config = _set_name(setup, name)
    proc = _mpirun(config, tmp_path, "--fail-at", "3", "--fail-how", how)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert re.search(message, output), output
    assert not (tmp_path / "rank0.npy").exists()  # nobody finished
    run = setup["root"] / "runs" / name
    # rank 0 saved iterations 1 and 2; it may be killed while writing iteration 2's checkpoint,
    # and then the atomic write leaves iteration 1's as the latest
    last = find_latest_checkpoint(run)
    assert last is not None and last.name in ("iter_00000001.safetensors",
                                              "iter_00000002.safetensors"), output
    assert ckpt.load_checkpoint(last)["iteration"] in (1, 2)
    # resume works with any number of ranks: with 2, bit-identical to the uninterrupted 2-rank
    # run; in one process, where the single-process reference ended (to float rounding)
    _wait_for_lock_owner_to_die(run)
    if resume_ranks == 2:
        proc = _mpirun(config, tmp_path, "--resume")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        resumed = np.load(tmp_path / "rank0.npy")
        assert resumed.tobytes() == np.load(two_ranks / "rank0.npy").tobytes()
    else:
        resumed = Trainer(load_config(config), resume="auto", progress=False)
        resumed.fit()
        flat = np.concatenate([p.data.ravel() for p in resumed.model.parameters()])
        np.testing.assert_allclose(flat, setup["reference"], rtol=0, atol=1e-5)


@needs_mpi
def test_a_stop_signal_to_one_rank_stops_every_rank_after_rank_0s_save(setup, tmp_path):
    """SIGTERM to rank 1 alone (a scheduler may signal any rank), while rank 0's checkpoint write
    is slow (2 s): every rank stops at the same iteration, rank 0's checkpoint is whole, the resume
    hint is printed, no rank aborts the job, the exit code is 143 (128 + SIGTERM). Rank 1 used to
    return at once and call MPI_Abort, which killed rank 0 in the middle of its save. (Resuming a
    2-rank run bit for bit: test_a_dying_rank_ends_the_job_and_the_checkpoint_survives.)"""
    from framework.weights import checkpoint as ckpt
    config = setup["root"] / "stopped.yaml"
    config.write_text(setup["config"].read_text().replace("name: dp", "name: stopped").replace(
        "checkpoint: {every: 1, keep: 10}", "checkpoint: {every: 1000, keep: 10}"))
    proc = _mpirun(config, tmp_path, "--signal-at", "2", "--signal-rank", "1", "--save-delay", "2")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert re.search(r"interrupted at iteration 2; checkpoint saved in \S+\. Resume with:\n  "
                     r"srgrad-train \S+ --resume auto", output), output
    assert "aborting all ranks" not in output and "MPI_ABORT" not in output, output
    run = setup["root"] / "runs" / "stopped"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["iter_00000002.safetensors"]
    assert ckpt.load_checkpoint(run / "checkpoints" / "iter_00000002.safetensors")["iteration"] == 2
    assert not (run / ".lock").exists()
