"""srgrad vs PyTorch CPU, side by side in one process at the same thread count.

    python scripts/benchmark.py                    # every section but mpi
    python scripts/benchmark.py --mpi              # MPI scale-out: 1 vs 2 ranks (needs mpirun)
    python scripts/benchmark.py --only resample    # one section (bench_resample.py)
    python scripts/benchmark.py --threads 2 --repeat 7 --markdown out.md

Each section is a module `scripts/bench_<name>.py` with `run(args) -> list[Row]`. Timings are the
median of `--repeat` runs after a warm-up, ours and torch's interleaved so machine noise hits both;
read the ratio column (ours / torch), not absolute times: this machine is shared and noisy.
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
    args, rest = ap.parse_known_args(argv)
    args.rest = rest
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numba
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    try:
        import torch
        torch.set_num_threads(args.threads)
        tv = torch.__version__
    except ImportError:
        tv = "absent"
    names = args.only or (["mpi"] if args.mpi else [s for s in sections() if s != "mpi"])
    unknown = sorted(set(names) - set(sections()))
    if unknown:
        ap.error(f"unknown section(s) {unknown}; known: {sections()}")
    header = (f"{datetime.date.today()} on {platform.machine()} {platform.processor() or ''}, "
              f"{args.threads} threads, torch {tv}, numba {numba.__version__}; command: "
              f"python scripts/benchmark.py {' '.join(argv if argv is not None else sys.argv[1:])}")
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
