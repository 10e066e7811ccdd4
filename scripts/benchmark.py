"""srgrad vs PyTorch CPU at the same thread count, interleaved in one process and (the models
section) each framework alone in its own fresh processes.

    python scripts/benchmark.py                    # every section but mpi
    python scripts/benchmark.py --mpi              # MPI scale-out: 1 vs 2 ranks (needs mpirun)
    python scripts/benchmark.py --only resample    # one section (bench_resample.py)
    python scripts/benchmark.py --threads 2 --repeat 7 --markdown out.md

Each section is a module `scripts/bench_<name>.py` with `run(args) -> list[Row]`. Timings are the
median of `--repeat` runs after a warm-up, ours and torch's interleaved so machine noise hits both;
read the ratio column (ours / torch), not absolute times: this machine is shared and noisy.
The models section also runs each framework alone in fresh child processes (`--apart-rounds`,
default 2, alternating): in one process one runtime's idle OpenMP threads spin and take the cores
from the other's next call, so its step and inference rows keep the separate processes' ratio.

The header says what makes two tables comparable: the CPU and its vector extensions, OpenBLAS's
core type, numba's target CPU, torch's ATen capability, the environment variables that change them
and the load. Measure as a user runs: `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python
scripts/benchmark.py ...`; what an AVX2-only CPU runs, on an AVX-512 one:
`env -u OPENBLAS_L2_SIZE $(python scripts/isa_env.py avx2) python scripts/benchmark.py ...`.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import os
import pathlib
import platform
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


@dataclasses.dataclass
class Row:
    name: str
    ours_ms: float
    torch_ms: float | None
    target: float | None = None  # the ratio we promise (ours/torch at most this)
    note: str = ""

    @property
    def ratio(self):
        return None if not self.torch_ms else self.ours_ms / self.torch_ms


# The CPU flags that decide which kernels the libraries run (lscpu names them this way)
_VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                 "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
# Environment variables that change the kernels or the threads of one side
_KNOBS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES",
          "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES", "OMP_WAIT_POLICY",
          "SRGRAD_MALLOC", "OMP_NUM_THREADS")


def _cpu():
    """(model name, its vector extensions) from /proc/cpuinfo, or what platform knows."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() in ("flags", "Features"):
                flags = set(value.split())
    except OSError:
        pass
    return model, [f for f in _VECTOR_FLAGS if f in flags]


def machine() -> list[str]:
    """The facts that make two timings comparable: the CPU and its vector extensions, the kernels
    each library picked for it (OpenBLAS's core type through threadpoolctl, numba's target CPU and
    vector registers, torch's ATen capability), the environment variables that change either, and
    the load average."""
    import numpy as np
    from threadpoolctl import threadpool_info

    from framework import _simd, malloc
    from framework.functional import _direct
    model, flags = _cpu()
    blas = [f"{i.get('internal_api')} {i.get('version')} core {i.get('architecture')}, "
            f"{i.get('num_threads')} threads" for i in threadpool_info() if i.get("user_api") == "blas"]
    name, _ = _simd.target()
    channels, pixels = _direct.forward_block(np.float32)
    lines = [f"CPU: {model}, {os.cpu_count()} logical CPUs; vector extensions: "
             f"{' '.join(flags) or 'none known'}",
             f"numpy BLAS: {'; '.join(blas) or 'none found'}",
             f"numba target CPU: {name} ({'AVX-512' if _simd.has_avx512() else 'no AVX-512'}: "
             f"{_simd.lanes(32)} float32 lanes per register; direct conv blocks of {channels} "
             f"channels x {pixels} pixels)",
             f"srgrad's allocator settings: {malloc.status()}"]
    try:
        import torch
        lines.append(f"torch {torch.__version__}: ATen CPU capability "
                     f"{torch.backends.cpu.get_cpu_capability()}")
    except ImportError:
        lines.append("torch: absent")
    knobs = [f"{k}={os.environ[k]}" for k in _KNOBS if k in os.environ]
    lines.append(f"environment: {' '.join(knobs) or 'none of ' + ', '.join(_KNOBS[:6])}")
    try:
        load = pathlib.Path("/proc/loadavg").read_text().split()[:3]
        lines.append(f"load average at start: {' '.join(load)}")
    except OSError:
        pass
    from bench_bf16 import tile_rates
    rates = tile_rates()
    if rates:  # the unit's rate on each CPU now: a shared host may take part of it (bench_bf16.py)
        lines.append("AMX tile unit at start, GMAC/s per CPU (peak 512 multiply-adds a cycle): "
                     + ", ".join(f"cpu{c} {r:.0f}" for c, r in rates.items()))
    return lines


def time_pair(ours, theirs, repeat: int = 5, warmup: int = 1):
    """Median ms of `ours()` and `theirs()` (theirs may be None), interleaved run by run."""
    for _ in range(warmup):
        ours()
        if theirs is not None:
            theirs()
    a, b = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        if theirs is not None:
            t = time.perf_counter()
            theirs()
            b.append(time.perf_counter() - t)
    return 1e3 * statistics.median(a), (1e3 * statistics.median(b) if b else None)


def sections():
    return sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))


def table(title: str, rows: list[Row]) -> str:
    out = [f"### {title}", "", "| case | srgrad ms | torch ms | ratio | target | |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        target = "" if r.target is None else f"<= {r.target:.2f}x"
        ok = "" if r.ratio is None or r.target is None else ("met" if r.ratio <= r.target else "MISSED")
        torch_ms = "" if r.torch_ms is None else f"{r.torch_ms:.1f}"
        out.append(f"| {r.name} | {r.ours_ms:.1f} | {torch_ms} | {ratio} | {target} | {ok} {r.note} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=None, help=f"sections to run (known: {', '.join(sections())})")
    ap.add_argument("--mpi", action="store_true", help="the MPI scale-out section (same as --only mpi)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", default=None, help="also write the tables to this file")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: the sections that know it (models) run srgrad under framework.autocast and "
                         "torch under torch.autocast (refused, with the reason, on a CPU without bfloat16)")
    args, rest = ap.parse_known_args(argv)
    args.rest = rest
    from framework import malloc
    malloc.tune()  # as the commands run (srgrad_cli.run)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numba
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    try:
        import torch
        torch.set_num_threads(args.threads)
        tv = torch.__version__
    except ImportError:
        tv = "absent"
    from framework import precision
    if args.precision == "bf16" and not precision.support().avx512_bf16:
        ap.error(f"--precision bf16: {precision.support().reason}")
    names = args.only or (["mpi"] if args.mpi else [s for s in sections() if s != "mpi"])
    unknown = sorted(set(names) - set(sections()))
    if unknown:
        ap.error(f"unknown section(s) {unknown}; known: {sections()}")
    header = "\n".join([
        f"{datetime.date.today()}, {args.threads} threads, torch {tv}, numba {numba.__version__}; command: "
        f"python scripts/benchmark.py {' '.join(argv if argv is not None else sys.argv[1:])}",
        *(f"- {line}" for line in machine()),
        f"- precision: {args.precision}" + (f" (srgrad's bfloat16 route: {precision.route()})"
                                            if args.precision == "bf16" else "")])
    print(header)
    blocks = [header]
    for name in names:
        mod = importlib.import_module(f"bench_{name}")
        rows = mod.run(args)
        block = table(getattr(mod, "TITLE", name), rows)
        print("\n" + block, flush=True)
        blocks.append(block)
    if args.markdown:
        pathlib.Path(args.markdown).write_text("\n\n".join(blocks) + "\n")


if __name__ == "__main__":
    main()
