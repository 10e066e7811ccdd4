"""Data-parallel training over MPI (through mpi4py), and the default single-process path.

    mpirun -n 4 srgrad-train configs/quickstart.yaml            # 4 ranks, one global batch
    mpirun --hostfile hosts -n 8 srgrad-train configs/edsr_x2.yaml

Every rank builds the same model from the same seed, takes its own rows of every global batch, and
after backward the gradients are averaged with ONE `Allreduce` over a single preallocated flat
buffer (not one call per parameter: per-call latency would dominate on small models). Every rank
then runs the same optimizer step on the same averaged gradient, so the weights stay identical.

This is the only module that imports mpi4py, and only lazily (importing `mpi4py.MPI` initialises
MPI), so a plain `python` launch never touches MPI. Only mpi4py's buffer methods (upper-case:
`Allreduce`, `Bcast`) are used: they move raw arrays; the lower-case ones would pickle.

Which path runs (`init(mode)`; mode defaults to the `SRGRAD_DISTRIBUTED` environment variable):
- "auto" (default): MPI when launched by mpirun/mpiexec (detected from its environment variables),
  otherwise the single-process path, exactly as if this module did not exist.
- "mpi": MPI, and an error saying how to install mpi4py when it is missing.
- "none": single process even under mpirun (every rank would then train alone: only for debugging).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from ...threads import limit_blas_threads

__all__ = ["DistributedError", "SingleProcess", "MPICommunicator", "FlatGradients", "init",
           "is_mpi_launch", "launch_world_size", "local_world_size", "default_threads",
           "configure_threads", "MODES"]

MODES = ("auto", "mpi", "none")

# Set by the launcher in every rank: Open MPI (OMPI_*), MPICH / Intel MPI's Hydra (PMI_*), PMIx
# (Slurm).
_LAUNCH_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")

INSTALL_HINT = ("pip install 'srgrad[mpi]' (mpi4py needs an MPI library: on Debian/Ubuntu "
                "apt-get install openmpi-bin libopenmpi-dev)")


class DistributedError(RuntimeError):
    """MPI was asked for and cannot be used (mpi4py missing), or a distributed setting is wrong."""


# -- launch detection ---------------------------------------------------------------------------
def is_mpi_launch(environ=None) -> bool:
    """True when this process was started by mpirun/mpiexec (its environment variables are set)."""
    env = os.environ if environ is None else environ
    return any(name in env for name in _LAUNCH_VARS)


def launch_world_size(environ=None) -> int | None:
    """The number of ranks the launcher started, or None when unknown (or not launched by MPI)."""
    env = os.environ if environ is None else environ
    for name in _SIZE_VARS:
        if env.get(name, "").isdigit():
            return int(env[name])
    return None


def local_world_size(environ=None) -> int:
    """Ranks on this machine (1 when not launched by MPI or when the launcher does not say)."""
    env = os.environ if environ is None else environ
    for name in _LOCAL_SIZE_VARS:
        if env.get(name, "").isdigit():
            return max(1, int(env[name]))
    return 1


# -- threads per rank ---------------------------------------------------------------------------
def default_threads(environ=None) -> int | None:
    """Threads per rank under mpirun: max(1, cores // ranks on this machine), never more than the
    cores this process may run on (mpirun may bind a rank to a few cores); None without mpirun."""
    env = os.environ if environ is None else environ
    if not is_mpi_launch(env):
        return None
    cores = os.cpu_count() or 1
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return max(1, min(allowed, cores // local_world_size(env)))


def configure_threads(environ=None) -> int | None:
    """Under mpirun, give each rank `default_threads()` numba and BLAS threads so that K ranks on
    one machine do not run K x cores threads. Returns the count, or None when not launched by MPI
    (nothing changes then). A thread variable the user set explicitly wins over the default.

    Call it FIRST in a command-line entry point, before any numba kernel or matrix product runs.
    The environment variables (NUMBA_NUM_THREADS, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
    MKL_NUM_THREADS) only take effect in libraries that are not loaded yet (and in child processes);
    `import framework` has already loaded numpy and numba, so the count is also applied at run time:
    `numba.set_num_threads` (numba starts its pool lazily, at the first parallel kernel, and the
    setting is per calling thread: call it from the training thread) and the BLAS library's
    (framework.threads.limit_blas_threads).
    """
    env = os.environ if environ is None else environ
    threads = default_threads(env)
    if threads is None:
        return None
    share = max(1, (os.cpu_count() or 1) // local_world_size(env))
    if threads < share and env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK")) == "0":
        # Open MPI binds each rank to ONE core when it starts at most 2 ranks: say how to lift it
        sys.stderr.write(f"srgrad: mpirun bound this rank to {threads} core(s) of the {share} it "
                         f"could use: add --bind-to none (or --bind-to socket) to mpirun for "
                         f"{share} threads per rank\n")
    user_numba = env.get("NUMBA_NUM_THREADS")
    user_blas = env.get("OPENBLAS_NUM_THREADS") or env.get("OMP_NUM_THREADS")
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, str(threads))
    if "numba" in sys.modules and not user_numba:
        import numba
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if not user_blas:
        limit_blas_threads(threads)
    return threads


# -- the flat gradient buffer -------------------------------------------------------------------
class FlatGradients:
    """Every parameter's gradient packed into one preallocated contiguous buffer, plus trailing
    slots for the loss values, so one collective call moves them all. Parameters whose `.grad` is
    None pack as zeros and stay None (every rank runs the same graph: unused here means unused
    everywhere).

    Args:
        params: the trainable parameters, in the same order on every rank (model order).
        slots: how many loss values travel with them.
    """

    def __init__(self, params, slots: int = 1):
        self.params = [p for p in params if p.requires_grad]
        dtypes = sorted({p.dtype.name for p in self.params})
        if len(dtypes) != 1:
            raise DistributedError(f"data-parallel training needs parameters of one dtype to pack "
                                   f"them into one buffer, got {dtypes or 'no parameters'}")
        self.offsets = np.cumsum([0] + [p.numel() for p in self.params])
        self.slots = slots
        self.buffer = np.zeros(int(self.offsets[-1]) + slots, dtype=dtypes[0])

    def pack(self, losses=(0.0,)) -> np.ndarray:
        for p, lo, hi in zip(self.params, self.offsets[:-1], self.offsets[1:]):
            if p.grad is None:
                self.buffer[lo:hi] = 0
            else:
                self.buffer[lo:hi] = p.grad.data.reshape(-1)
        self.buffer[len(self.buffer) - self.slots:] = losses
        return self.buffer

    def unpack(self) -> list[float]:
        """Point every gradient at its slice of the buffer; return the loss slots."""
        # Views into the buffer, not copies: a backward may have left a read-only broadcast view as
        # a gradient, and pack() copies each gradient in again before the next reduction.
        for p, lo, hi in zip(self.params, self.offsets[:-1], self.offsets[1:]):
            if p.grad is not None:
                p.grad.data = self.buffer[lo:hi].reshape(p.shape)
        return [float(v) for v in self.buffer[len(self.buffer) - self.slots:]]


# -- communicators ------------------------------------------------------------------------------
class SingleProcess:
    """Rank 0 of a world of 1: every collective is a no-op, so the training path is unchanged."""

    rank = 0
    world_size = 1
    is_root = True
    allreduce_seconds = 0.0

    def allreduce_mean_(self, buffer: np.ndarray) -> np.ndarray:
        return buffer

    def average_gradients_(self, params, loss: float = 0.0) -> float:
        return loss

    def broadcast_params(self, model) -> None:
        return None

    def check_same(self, value: int, what: str) -> None:
        return None

    def max_(self, value: int) -> int:
        return int(value)

    def barrier(self) -> None:
        return None

    def abort(self, message: str, code: int = 1):
        raise SystemExit(f"srgrad: {message}")

    def __repr__(self):
        return "SingleProcess(rank=0, world_size=1)"


class MPICommunicator:
    """One rank of an MPI job (MPI.COMM_WORLD). `allreduce_seconds` accumulates the wall time spent
    in gradient Allreduce (waiting for the slowest rank included), for benchmarks and logs."""

    def __init__(self, mpi):
        self._mpi = mpi
        self.comm = mpi.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self.is_root = self.rank == 0
        self.allreduce_seconds = 0.0
        self._flats: dict = {}  # one packed buffer per (parameter set, number of loss slots)

    def allreduce_mean_(self, buffer: np.ndarray) -> np.ndarray:
        """Average a contiguous float array over the ranks, in place: ONE Allreduce(SUM), / K."""
        if not (isinstance(buffer, np.ndarray) and buffer.flags.c_contiguous
                and buffer.dtype.kind == "f"):
            raise TypeError("allreduce_mean_: buffer must be a C-contiguous float numpy array")
        start = time.perf_counter()
        self.comm.Allreduce(self._mpi.IN_PLACE, buffer, op=self._mpi.SUM)
        self.allreduce_seconds += time.perf_counter() - start
        buffer /= buffer.dtype.type(self.world_size)
        return buffer

    def average_gradients_(self, params, loss=0.0):
        """Replace every parameter's `.grad` by its mean over the ranks, and return the mean of
        `loss` (a float, or a sequence of floats: one per loss term), with ONE Allreduce (pack,
        reduce, unpack). The loss travels with the gradients so that every rank sees the same
        (global-batch) loss and takes the same decisions on it. The flat buffer is allocated on the
        first call for a parameter set (a GAN has two) and reused."""
        params = [p for p in params if p.requires_grad]
        values = [float(v) for v in loss] if isinstance(loss, (list, tuple)) else [float(loss)]
        key = (tuple(id(p) for p in params), len(values))
        flat = self._flats.get(key)
        if flat is None:
            flat = self._flats[key] = FlatGradients(params, len(values))
        self.allreduce_mean_(flat.pack(values))
        out = flat.unpack()
        return out if isinstance(loss, (list, tuple)) else out[0]

    def broadcast_params(self, model) -> None:
        """Copy rank 0's parameters and buffers to every rank (once, at start: the same seed
        should already give the same weights; this makes it certain, e.g. if an initialisation
        used the clock)."""
        for arr in model.state_dict().values():
            flat = np.ascontiguousarray(arr)
            self.comm.Bcast(flat, root=0)
            if flat is not arr:
                np.copyto(arr, flat)

    def max_(self, value: int) -> int:
        """The largest rank's integer `value`, on every rank (one 1-int Allreduce): e.g. a stop
        signal (its number; 0: none) that reached some ranks, or the ranks at different
        iterations, is acted on by every rank at the same one."""
        buf = np.array([int(value)], dtype=np.int64)
        self.comm.Allreduce(self._mpi.IN_PLACE, buf, op=self._mpi.MAX)
        return int(buf[0])

    def check_same(self, value: int, what: str) -> None:
        """Raise DistributedError on every rank unless all ranks hold the same integer `value`
        (e.g. the iteration a run resumes at: ranks that disagree would deadlock later)."""
        bounds = np.array([value, -value], dtype=np.int64)
        self.comm.Allreduce(self._mpi.IN_PLACE, bounds, op=self._mpi.MAX)
        if bounds[0] != -bounds[1]:
            raise DistributedError(
                f"ranks disagree on {what} (from {-bounds[1]} to {bounds[0]}; rank {self.rank} has "
                f"{value}): every rank must see the same files at the same paths (a shared "
                f"filesystem, or identical copies on every node)")

    def barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, message: str, code: int = 1):
        """Print `message` (naming this rank) and end EVERY rank: a rank that stops alone would
        leave the others blocked in their next Allreduce forever."""
        sys.stderr.write(f"srgrad: rank {self.rank}/{self.world_size}: {message}; aborting all "
                         f"ranks\n")
        sys.stderr.flush()
        self.comm.Abort(code)

    def __repr__(self):
        return f"MPICommunicator(rank={self.rank}, world_size={self.world_size})"


def unavailable_reason() -> str | None:
    """Why a multi-rank run cannot start on this machine (no mpirun, or no mpi4py), or None: the
    tests and the MPI benchmark skip with this text."""
    import shutil
    if shutil.which("mpirun") is None:
        return "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (pip install 'srgrad[mpi]')"
    return None


def _import_mpi(why: str):
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(f"{why}, but mpi4py is not installed ({exc}): {INSTALL_HINT}") \
            from exc
    return MPI


def init(mode: str | None = None):
    """The communicator for this process: `MPICommunicator` or `SingleProcess`.

    Args:
        mode: "auto", "mpi" or "none" (see the module docstring; the `--distributed` option of
            srgrad-train); None reads SRGRAD_DISTRIBUTED (default "auto").
    """
    source = "--distributed "
    if mode is None:
        mode, source = os.environ.get("SRGRAD_DISTRIBUTED", "auto"), "SRGRAD_DISTRIBUTED="
    if mode not in MODES:
        raise DistributedError(f"{source}{mode!r}: expected one of {', '.join(MODES)}")
    if mode == "none":
        return SingleProcess()
    if mode == "mpi":
        return MPICommunicator(_import_mpi(f"MPI training was requested ({source}mpi)"))
    if not is_mpi_launch():
        return SingleProcess()
    if launch_world_size() == 1:
        try:
            return MPICommunicator(_import_mpi("launched by mpirun"))
        except DistributedError:
            return SingleProcess()
    # Several ranks without mpi4py would each train alone and overwrite each other's run folder.
    return MPICommunicator(_import_mpi(
        f"this process was started by mpirun with {launch_world_size() or 'several'} ranks"))
