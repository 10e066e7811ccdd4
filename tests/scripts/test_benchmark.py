"""scripts/benchmark.py's header names what decides the kernels each side runs (issue 29), and the
models section keeps the ratio of each framework timed alone in its own process."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
benchmark = pytest.importorskip("benchmark")


def test_the_header_says_cpu_blas_core_numba_target_torch_capability_knobs_and_load(monkeypatch):
    from threadpoolctl import threadpool_info

    from framework import _simd
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    lines = benchmark.machine()
    text = "\n".join(lines)
    model, flags = benchmark._cpu()
    assert lines[0].startswith(f"CPU: {model}") and all(f in lines[0] for f in flags)
    cores = [i["architecture"] for i in threadpool_info() if i.get("user_api") == "blas"]
    assert cores and all(f"core {c}" in text for c in cores)
    assert f"numba target CPU: {_simd.target()[0]} " in text
    assert f"{_simd.lanes(32)} float32 lanes" in text
    torch = pytest.importorskip("torch")
    assert f"ATen CPU capability {torch.backends.cpu.get_cpu_capability()}" in text
    env = next(line for line in lines if line.startswith("environment: "))
    assert "OPENBLAS_CORETYPE=Haswell" in env and "ONEDNN_MAX_CPU_ISA" not in env
    from framework import precision
    if precision.support().amx_bf16:  # the tile unit's rate on each CPU
        import os
        tile = lines[-1]
        assert tile.startswith("AMX tile unit at start, GMAC/s per CPU")
        rates = [float(part.split()[-1]) for part in tile.split(": ", 1)[1].split(", ")]
        assert len(rates) == len(os.sched_getaffinity(0)) and all(r > 10 for r in rates)
        lines = lines[:-1]
    assert lines[-1].startswith("load average at start: ")


def test_a_model_row_keeps_the_separate_processes_ratio():
    bench_models = pytest.importorskip("bench_models")
    apart = {"runs": 4, "ours": {"step_s": 0.030}, "torch": {"step_s": 0.040}}
    row = bench_models._timing_row("EDSR step", 1.0, (50.0, 25.0, "n"), apart)
    assert (row.ours_ms, row.torch_ms) == pytest.approx((30.0, 40.0))
    assert row.ratio == pytest.approx(0.75)
    assert "interleaved 50.0 / 25.0 ms = 2.00x" in row.note
    alone = bench_models._timing_row("EDSR step", 1.0, (50.0, 25.0, "n"), None)
    assert alone.ratio == pytest.approx(2.0) and "interleaved in one process" in alone.note
