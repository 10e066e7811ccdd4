"""Whole models, srgrad vs the PyTorch twins of tests/twins/ (same architecture, same
weights, parameter counts checked): one training step (forward, L1 loss, backward, Adam step) on a
batch of 16 LR patches, inference (no_grad) on one 512x512 LR image, peak memory (RSS) of each, and
the time to the first training step in a fresh process. float32.

Run through the harness: `python scripts/benchmark.py --only models --threads 2`; section options
after the harness's own:
    --models ESPCN FSRCNN     default: the six classic models; `modern` = SRVGGNetCompact, MSRResNet,
                              RRDBNet, RCAN, SwinIR (SwinIR takes minutes per row); `efficient` =
                              SPAN, PLKSR, RealPLKSR; `transformers` = issue 30's HAT, Swin2SR, DAT
                              (minutes per row); `spandrel` = RealCUGAN, RealCUGAN-fast, SAFMN,
                              OmniSR (issue 30)
    --infer-size 512          the LR side of the inference image; 0 skips inference
    --infer-repeat N          repeats of the inference timing (default: the harness's --repeat)
    --heavy-repeat 2          at most this many for the inference of SRCNN, VDSR, EDSR and SwinIR
                              (at 512 -> 1024 they take seconds per image)
    --batch 16
    --memory / --no-memory    peak RSS (VmHWM) of a training step and of the inference, each in a
                              fresh child process per model and framework (default on)
    --first-step / --no-first-step   time from a fresh process's start to the end of its first
                              training step, numba cache warm, and cold (NUMBA_CACHE_DIR = an empty
                              temporary folder; srgrad only: torch has nothing to compile)
    --apart-rounds 2          each framework also timed alone in its own fresh process (issue 29:
                              one runtime's idle OpenMP threads spin and take the cores from the
                              other's next call in a shared process), this many rounds of one child
                              per framework, alternating; 0 skips them

With the harness's `--precision bf16` both sides run under autocast (srgrad's framework.autocast,
torch.autocast("cpu", dtype=torch.bfloat16)) and each step and inference row's note also gives
srgrad's own float32 time (timed the same way) and the speed-up of bf16 over it.

Each step and inference row keeps the ratio of the separate processes (the median of every timed
run of every round), with the interleaved in-process times in its note.

The same file is the child: `python scripts/bench_models.py --child ours|torch MODEL step|infer ...`
(or `--child onnxruntime|openvino MODEL infer`: that engine on srgrad's float32 export of the same
model, the export not timed; torch and the engines run as their users run them, glibc's allocator
untouched, srgrad with its commands' `malloc.tune()`) prints one JSON line {"first_step_s", "step_s", "times_s", "cpu_s", "peak_mb", "base_mb"}: the time
from its start to the end of its first step (or inference), its next ones (`--repeat` of them, their
median in step_s; cpu_s the median of their CPU time, all threads: on a loaded machine the figure
that moves least), its peak RSS and its RSS after the imports and the model, before any work.
"""
from __future__ import annotations

import time

_T0 = time.perf_counter()  # the child's clock starts before its imports

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

from benchmark import Row, time_pair  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent

TITLE = "Models: training step (16 patches, L1 + Adam) and inference, float32"

# name -> (spec, LR patch side): issue 6's shapes. SRCNN's 48 px LR is its 96 px bicubic input.
CASES = {
    "SRCNN": ({"type": "SRCNN", "scale": 2}, 48),
    "FSRCNN": ({"type": "FSRCNN", "scale": 2}, 48),
    "ESPCN": ({"type": "ESPCN", "scale": 3}, 32),
    "VDSR": ({"type": "VDSR", "scale": 2}, 24),
    "EDSR": ({"type": "EDSR", "scale": 2}, 48),
    "UpsampleNet": ({"type": "UpsampleNet", "scale": 2}, 48),
    # configs/swinir_cpu_x2.yaml's model (lightweight SwinIR at the 48 px patches it trains on)
    "SwinIR": ({"type": "SwinIR", "scale": 2, "img_size": 48, "embed_dim": 60, "depths": [6, 6, 6, 6],
                "num_heads": [6, 6, 6, 6], "window_size": 8, "mlp_ratio": 2,
                "upsampler": "pixelshuffledirect"}, 48),
    # issue 15's models at their CPU-sized configs (configs/*_cpu_*.yaml, realesr_compact_x4.yaml)
    "SRVGGNetCompact": ({"type": "SRVGGNetCompact", "scale": 4, "num_feat": 64, "num_conv": 16,
                         "act_type": "prelu"}, 16),
    "MSRResNet": ({"type": "MSRResNet", "scale": 2, "num_feat": 32, "num_block": 2}, 24),
    "RRDBNet": ({"type": "RRDBNet", "scale": 4, "num_feat": 32, "num_block": 1, "num_grow_ch": 16}, 16),
    "RCAN": ({"type": "RCAN", "scale": 2, "num_feat": 32, "num_group": 2, "num_block": 2,
              "squeeze_factor": 8}, 24),
    # issue 30's efficient convnets at their CPU-sized configs (configs/*_cpu_x2.yaml)
    "SPAN": ({"type": "SPAN", "scale": 2, "feature_channels": 16, "num_blocks": 2, "norm": False}, 24),
    "PLKSR": ({"type": "PLKSR", "scale": 2, "dim": 24, "n_blocks": 3, "kernel_size": 13, "ccm_type": "DCCM",
               "use_ea": False}, 24),
    "RealPLKSR": ({"type": "RealPLKSR", "scale": 2, "dim": 24, "n_blocks": 3, "kernel_size": 13,
                   "use_ea": False, "layer_norm": True}, 24),
    # issue 30's transformers at their CPU-sized configs (configs/hat_cpu_x2.yaml, swin2sr_cpu_x2.yaml,
    # dat_cpu_x2.yaml)
    "HAT": ({"type": "HAT", "scale": 2, "img_size": 32, "window_size": 8, "compress_ratio": 24,
             "squeeze_factor": 24, "depths": [2, 2], "embed_dim": 48, "num_heads": [6, 6],
             "mlp_ratio": 2}, 32),
    "Swin2SR": ({"type": "Swin2SR", "scale": 2, "img_size": 32, "window_size": 8, "depths": [2, 2],
                 "embed_dim": 48, "num_heads": [6, 6], "mlp_ratio": 2,
                 "upsampler": "pixelshuffledirect"}, 32),
    "DAT": ({"type": "DAT", "scale": 2, "img_size": 32, "split_size": [8, 16], "depth": [2, 2],
             "embed_dim": 48, "num_heads": [4, 4], "expansion_factor": 2.0,
             "upsampler": "pixelshuffledirect"}, 32),
    # issue 30's: Real-CUGAN at its published size (up2x, at its 32 px minimum) and the x2 fast of
    # configs/realcugan_cpu_x2.yaml (at its 40 px minimum); SAFMN at its published size
    # (dim 36, 8 blocks), OmniSR at its CPU config
    "RealCUGAN": ({"type": "RealCUGAN", "scale": 2}, 32),
    "RealCUGAN-fast": ({"type": "RealCUGAN", "scale": 2, "fast": True}, 40),
    "SAFMN": ({"type": "SAFMN", "scale": 2, "dim": 36, "n_blocks": 8}, 32),
    "OmniSR": ({"type": "OmniSR", "scale": 2, "num_feat": 32, "res_num": 2, "window_size": 8}, 32),
}
DEFAULT_MODELS = ["SRCNN", "FSRCNN", "ESPCN", "VDSR", "EDSR", "UpsampleNet"]  # SwinIR: on request
MODERN = ["SRVGGNetCompact", "MSRResNet", "RRDBNet", "RCAN", "SwinIR"]  # --models modern
EFFICIENT = ["SPAN", "PLKSR", "RealPLKSR"]  # --models efficient (issue 30)
TRANSFORMERS = ["HAT", "Swin2SR", "DAT"]  # --models transformers (issue 30's; minutes per row)
HEAVY = ("SRCNN", "VDSR", "EDSR", "SwinIR", "HAT", "Swin2SR", "DAT")  # whole-image inference at 1024x1024 output: seconds per run
SPANDREL = ["RealCUGAN", "RealCUGAN-fast", "SAFMN", "OmniSR"]  # --models spandrel (issue 30)
# whole-image inference at 1024x1024 output: seconds per run
HEAVY = ("SRCNN", "VDSR", "EDSR", "SwinIR", "RealCUGAN", "RealCUGAN-fast", "OmniSR")
# issue 19's targets (issue 6's were step 1.25x, inference 1.25x, memory 1.5x; issue 15's SwinIR
# step 1.5x and modern inference 1.0x): ahead of torch on every row
TARGETS = {"step": 1.0, "step UpsampleNet": 0.7, "infer": 0.8, "memory": 1.0}
FIRST_STEP_WARM_S, FIRST_STEP_COLD_S = 3.0, 60.0


def _options(rest):
    ap = argparse.ArgumentParser(prog="bench_models")
    ap.add_argument("--models", nargs="*", default=DEFAULT_MODELS,
                    choices=list(CASES) + ["modern", "efficient", "transformers", "spandrel"])
    ap.add_argument("--infer-size", type=int, default=512)
    ap.add_argument("--infer-repeat", type=int, default=None)
    ap.add_argument("--heavy-repeat", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--first-step", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--apart-rounds", type=int, default=2)
    ap.add_argument("--capture", choices=("on", "off"), default="on",
                    help="srgrad's step and inference through captured graphs (srgrad-train's and "
                         "srgrad-infer's default) or the eager engine")
    opts = ap.parse_known_args(rest)[0]
    opts.capture = opts.capture == "on"
    groups = {"modern": MODERN, "efficient": EFFICIENT, "transformers": TRANSFORMERS,
              "spandrel": SPANDREL}
    opts.models = [m for name in opts.models for m in groups.get(name, [name])]
    return opts


def _batch(spec, side, batch):
    s, rng = spec["scale"], np.random.default_rng(0)
    lq = rng.uniform(0, 1, (batch, 3, side, side)).astype(np.float32)
    gt = rng.uniform(0, 1, (batch, 3, side * s, side * s)).astype(np.float32)
    return lq, gt


def _image(side):
    return np.random.default_rng(1).uniform(0, 1, (1, 3, side, side)).astype(np.float32)


# -- the two frameworks' step and inference closures ----------------------------------------------

def _ours_model(spec):
    import models  # noqa: F401  registers the architectures
    from framework.nn import init
    from framework.registry import MODELS
    init.manual_seed(0)
    return MODELS.build(spec)


def _ours_step(model, lq, gt, precision="fp32", capture=False):
    """One training step; `capture`: as srgrad-train runs it by default (train.capture: auto), the
    forward, loss and backward replayed from a captured graph after two recorded calls, Adam fused;
    `precision`: the forward under framework.autocast (its backward runs in each op's precision)."""
    import framework as sg
    import framework.functional as F
    from framework.capture import Capture
    from framework.optim import Adam
    x, y = sg.tensor(lq), sg.tensor(gt)
    opt = Adam(model.parameters(), lr=1e-4, fused=capture)
    cap = Capture([model], enabled=capture)

    def step():
        opt.zero_grad()
        with sg.autocast(precision):
            cap(lambda x, y: {"loss": F.l1_loss(model(x), y)}, x, y)
        opt.step()
    return step


def _ours_infer(model, lq, precision="fp32", capture=False):
    """One image under no_grad; `capture`: through a captured inference graph (srgrad-infer's way)
    after two recorded calls."""
    import framework as sg
    from framework.capture import Capture
    x = sg.tensor(lq)
    model.eval()  # SwinIR's drop path (and any dropout) off, as in real inference
    cap = Capture([model], train=False, enabled=capture)

    def infer():
        with sg.no_grad(), sg.autocast(precision):
            cap(lambda x: {"sr": model(x)}, x)
    return infer


def _torch_step(twin, lq, gt, precision="fp32"):
    import torch
    tx, ty = torch.from_numpy(lq), torch.from_numpy(gt)
    opt = torch.optim.Adam(twin.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = torch.nn.functional.l1_loss(twin(tx), ty)
        loss.backward()
        opt.step()
    return step


def _torch_infer(twin, lq, precision="fp32"):
    import torch
    tx = torch.from_numpy(lq)
    twin.eval()

    def infer():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            twin(tx)
    return infer


def _pair(spec):
    """Our model and its torch twin with the same weights."""
    import torch
    from tests.twins import twin_of
    ours = _ours_model(spec)
    twin = twin_of(ours, spec, dtype=torch.float32)
    n_ours, n_twin = ours.num_parameters(), sum(p.numel() for p in twin.parameters())
    if n_ours != n_twin:
        raise RuntimeError(f"{spec['type']}: {n_ours} parameters here, {n_twin} in the torch twin")
    return ours, twin, n_ours


# -- rows -----------------------------------------------------------------------------------------

def _conv_gflop(model, lq, training):
    """GFLOP of the model's convolutions (2 x multiply-adds) on batch `lq`: the forward, or for a
    training step the forward + input gradient + weight gradient (no input gradient for a conv whose
    input needs none, e.g. the first). Counted by wrapping F.conv2d / F.conv_transpose2d during one
    forward on the first image, times the batch size."""
    import framework as sg
    import framework.functional as F
    real = {"conv2d": F.conv2d, "conv_transpose2d": F.conv_transpose2d}
    total = [0.0]

    def counting(kind):
        def op(x, weight, *args, **kwargs):
            y = real[kind](x, weight, *args, **kwargs)
            # a whole weight's multiply-adds per output pixel of a conv, per input pixel of a
            # transposed conv
            pixels = y.shape[2] * y.shape[3] if kind == "conv2d" else x.shape[2] * x.shape[3]
            fwd = 2.0 * pixels * np.prod(weight.shape)
            total[0] += fwd * (2 + x.requires_grad if training else 1)
            return y
        return op

    try:
        F.conv2d, F.conv_transpose2d = counting("conv2d"), counting("conv_transpose2d")
        with (sg.enable_grad() if training else sg.no_grad()):
            model(sg.tensor(lq[:2]))  # 2: DAT's BatchNorm trains on more than one value; the
            # count is per image (pixels of one output map)
    finally:
        F.conv2d, F.conv_transpose2d = real["conv2d"], real["conv_transpose2d"]
    return total[0] * lq.shape[0] / 1e9


def _rates(gflop, a_ms, b_ms):
    return f"convs {gflop:.1f} GFLOP: {gflop / a_ms * 1e3:.0f} vs {gflop / b_ms * 1e3:.0f} GFLOP/s"


def _own_fp32(fn, precision, repeat):
    """With bf16: ' srgrad fp32 X ms (bf16 Yx faster)' from fn('fp32') timed alone, else ''."""
    if precision == "fp32":
        return None
    return time_pair(fn("fp32"), None, repeat)[0]


def _speedup(own, a):
    return "" if own is None else f"; srgrad fp32 {own:.1f} ms, bf16 {own / a:.2f}x faster"


def _step_pair(name, spec, side, batch, repeat, precision="fp32", capture=False):
    """(ours ms, torch ms, note) of a training step, interleaved in this process."""
    ours, twin, n = _pair(spec)
    lq, gt = _batch(spec, side, batch)
    step = _ours_step(ours, lq, gt, precision, capture)
    step()  # a captured step records its first two calls; time_pair warms up once more
    a, b = time_pair(step, _torch_step(twin, lq, gt, precision), repeat)
    own = _own_fp32(lambda p: _ours_step(ours, lq, gt, p, capture), precision, repeat)
    return a, b, f"{n:,} params; {_rates(_conv_gflop(ours, lq, True), a, b)}{_speedup(own, a)}"


def _infer_pair(name, spec, side, repeat, precision="fp32", capture=False):
    """(ours ms, torch ms, note) of the inference on one image, interleaved in this process."""
    ours, twin, _ = _pair(spec)
    lq = _image(side)
    infer = _ours_infer(ours, lq, precision, capture)
    if capture:
        infer()  # the graph records its first two calls
    # One warm-up each: the training step before it already compiled every kernel.
    a, b = time_pair(infer, _torch_infer(twin, lq, precision), repeat)
    own = _own_fp32(lambda p: _ours_infer(ours, lq, p, capture), precision, repeat)
    return a, b, f"repeat {repeat}; {_rates(_conv_gflop(ours, lq, False), a, b)}{_speedup(own, a)}"


def _timing_row(label, target, together, apart):
    """The row of one case: the separate processes' times and ratio when they ran, else the
    interleaved ones; the other figures in the note."""
    a, b, note = together
    if not apart:
        return Row(label, a, b, target, note=f"interleaved in one process; {note}")
    oa, ob = apart["ours"]["step_s"] * 1e3, apart["torch"]["step_s"] * 1e3
    own = apart["ours_fp32"]["step_s"] * 1e3 if "ours_fp32" in apart else None
    return Row(label, oa, ob, target, note=f"separate processes ({apart['runs']} runs each){_speedup(own, oa)}; "
                                           f"interleaved {a:.1f} / {b:.1f} ms = {a / b:.2f}x; {note}")


def _child(framework, name, phase, args, cache_dir=None, repeat=1, precision=None):
    """Run this file as a fresh child process; its JSON report."""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), NUMBA_NUM_THREADS=str(args.threads))
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, str(HERE / "bench_models.py"), "--child", framework, name, phase,
           "--threads", str(args.threads), "--batch", str(args.batch), "--infer-size", str(args.infer_size),
           "--repeat", str(repeat), "--precision", precision or args.precision,
           "--capture", "on" if args.capture else "off"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child {' '.join(cmd[2:])} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _apart(name, phase, opts, repeat):
    """Each framework alone in fresh child processes, opts.apart_rounds rounds alternating ours and
    torch: per framework the first round's report with step_s = the median of every round's timed
    runs; None when the rounds are off."""
    if opts.apart_rounds <= 0:
        return None
    reports = {"ours": [], "torch": []}
    if opts.precision != "fp32":
        reports["ours_fp32"] = []
    for _ in range(opts.apart_rounds):
        for fw in reports:
            own = fw == "ours_fp32"
            reports[fw].append(_child("ours" if own else fw, name, phase, opts, repeat=repeat,
                                      precision="fp32" if own else None))
    out = {"runs": opts.apart_rounds * repeat}
    for fw, rs in reports.items():
        out[fw] = dict(rs[0], step_s=statistics.median(t for r in rs for t in r["times_s"]))
    return out


def _base_note(reports):
    """The RSS before any work (libraries + model) and the growth above it, both frameworks."""
    o, t = reports["ours"], reports["torch"]
    return (f"before work {o['base_mb']:.0f} / {t['base_mb']:.0f} MB, growth "
            f"{o['peak_mb'] - o['base_mb']:.0f} / {t['peak_mb'] - t['base_mb']:.0f} MB")


def _fresh_process_rows(name, side, opts, step, infer):
    """Peak RSS of a training step and of the inference, and the time to the first step, from fresh
    child processes per framework (the separate-process timings' when they ran; srgrad's cold-cache
    first step in one more)."""
    rows = []
    step = step or {fw: _child(fw, name, "step", opts, repeat=2) for fw in ("ours", "torch")}
    if opts.memory:
        rows.append(Row(f"{name} peak RSS, steps ({opts.batch},3,{side},{side}) [MB]",
                        step["ours"]["peak_mb"], step["torch"]["peak_mb"], TARGETS["memory"],
                        note=_base_note(step)))
        if opts.infer_size:
            infer = infer or {fw: _child(fw, name, "infer", opts) for fw in ("ours", "torch")}
            rows.append(Row(f"{name} peak RSS, inference (1,3,{opts.infer_size},{opts.infer_size}) [MB]",
                            infer["ours"]["peak_mb"], infer["torch"]["peak_mb"], TARGETS["memory"],
                            note=_base_note(infer)))
    if opts.first_step:
        warm, steady = step["ours"]["first_step_s"], step["ours"]["step_s"]
        with tempfile.TemporaryDirectory(prefix="srgrad-numba-cold-") as cold_dir:
            cold = _child("ours", name, "step", opts, cache_dir=cold_dir)
        ok_warm = "met" if warm < FIRST_STEP_WARM_S else "MISSED"
        ok_cold = "met" if cold["first_step_s"] < FIRST_STEP_COLD_S else "MISSED"
        # what the first step costs beyond a steady one: interpreter, imports, model, cache loads
        theirs = step["torch"]["first_step_s"]
        rows.append(Row(f"{name} first step, fresh process, numba cache warm", 1e3 * warm, 1e3 * theirs,
                        note=f"< {FIRST_STEP_WARM_S:.0f} s {ok_warm}; {warm - steady:.2f} s above its "
                             f"next step (torch {theirs - step['torch']['step_s']:.2f})"))
        rows.append(Row(f"{name} first step, fresh process, numba cache cold", 1e3 * cold["first_step_s"],
                        None, note=f"< {FIRST_STEP_COLD_S:.0f} s {ok_cold}; "
                                   f"{cold['first_step_s'] - cold['step_s']:.1f} s above its next step"))
    return rows


def run(args) -> list:
    global TITLE
    opts = _options(getattr(args, "rest", []))
    opts.threads = args.threads
    opts.precision = getattr(args, "precision", "fp32")
    if opts.precision == "bf16":
        TITLE = TITLE.replace("float32", "bf16 autocast on both sides (srgrad's own float32 in the notes)")
    together = {}
    for name in opts.models:
        spec, side = CASES[name]
        together[name, "step"] = _step_pair(name, spec, side, opts.batch, args.repeat, opts.precision,
                                            opts.capture)
        if opts.infer_size:
            repeat = opts.infer_repeat or args.repeat
            repeat = min(repeat, opts.heavy_repeat) if name in HEAVY else repeat
            together[name, "infer"] = _infer_pair(name, spec, opts.infer_size, repeat, opts.precision,
                                                  opts.capture)
    rows = []
    # children after the in-process timings: they would compete for the cores
    for name in opts.models:
        spec, side = CASES[name]
        step = _apart(name, "step", opts, args.repeat)
        rows.append(_timing_row(f"{name} x{spec['scale']} step ({opts.batch},3,{side},{side})",
                                TARGETS.get(f"step {name}", TARGETS["step"]), together[name, "step"], step))
        infer = None
        if opts.infer_size:
            repeat = opts.infer_repeat or args.repeat
            infer = _apart(name, "infer", opts, min(repeat, opts.heavy_repeat) if name in HEAVY else repeat)
            size = opts.infer_size
            rows.append(_timing_row(f"{name} x{spec['scale']} inference (1,3,{size},{size})",
                                    TARGETS.get(f"infer {name}", TARGETS["infer"]), together[name, "infer"],
                                    infer))
        if opts.memory or opts.first_step:
            rows += _fresh_process_rows(name, side, opts, step, infer)
    return rows


# -- the child ----------------------------------------------------------------------------------------

def _rss_mb(field="VmRSS"):
    """The process's resident set now (VmRSS) or its peak (VmHWM), MB, from /proc/self/status."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (Linux only)")


def _engine_session(name, model, image, threads, precision):
    """A function running ONNX Runtime (float32) or OpenVINO (precision hint f32, or bf16) on srgrad's
    fixed-size export of `model` for `image`, on `threads` threads (the export and the engine's
    compile happen here, before the timed calls)."""
    from framework.onnx import export
    folder = tempfile.mkdtemp(prefix="srgrad-bench-onnx-")
    path = os.path.join(folder, "model.onnx")
    export(model, image, path, dynamic=False)
    if name == "onnxruntime":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: image}
        return lambda: sess.run(None, feed)[0]
    import openvino as ov
    compiled = ov.Core().compile_model(path, "CPU", {
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"})
    request = compiled.create_infer_request()
    return lambda: request.infer({0: image})


def child_main(argv):
    """One fresh process: build one model in one framework, run a training step (then --repeat more,
    timed) or one inference (then --repeat more, timed); print {"first_step_s", "step_s", "times_s",
    "peak_mb", "base_mb"} as JSON."""
    ap = argparse.ArgumentParser(prog="bench_models --child")
    ap.add_argument("framework", choices=["ours", "torch", "onnxruntime", "openvino"])
    ap.add_argument("name", choices=list(CASES))
    ap.add_argument("phase", choices=["step", "infer"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--infer-size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--capture", choices=("on", "off"), default="on")
    a = ap.parse_args(argv)
    engine = a.framework in ("onnxruntime", "openvino")
    if engine and a.phase != "infer":
        ap.error(f"{a.framework}: inference only")
    if a.framework == "ours":  # torch and the engines keep glibc's allocator, as their users have it
        from framework import malloc
        malloc.tune()  # as the commands run (srgrad_cli.run)
    capture = a.framework == "ours" and a.capture == "on"
    spec, side = CASES[a.name]
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    if engine:
        model = _engine_session(a.framework, _ours_model(spec), _image(a.infer_size), a.threads,
                                a.precision)
    elif a.framework == "ours":
        import numba
        numba.set_num_threads(a.threads)
        model = _ours_model(spec)
    else:
        import torch
        from tests.twins import build_twin
        torch.set_num_threads(a.threads)
        torch.manual_seed(0)
        model = build_twin(spec)
    base = _rss_mb()  # libraries, model and interpreter, before any work
    if engine:
        fn = model
    elif a.phase == "step":
        lq, gt = _batch(spec, side, a.batch)
        fn = _ours_step(model, lq, gt, a.precision, capture) if a.framework == "ours" else \
            _torch_step(model, lq, gt, a.precision)
    else:
        image = _image(a.infer_size)
        fn = _ours_infer(model, image, a.precision, capture) if a.framework == "ours" else \
            _torch_infer(model, image, a.precision)
    fn()
    first = time.perf_counter() - _T0
    if capture:  # the second recorded call, then the first replay (it builds and folds the graph,
        fn()  # 1.7x a replay for RRDBNet at 128^2): the timed ones replay the built graph
        fn()
    times, cpu = [], []
    for _ in range(max(1, a.repeat)):
        t, c = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(json.dumps({"first_step_s": first, "step_s": statistics.median(times), "times_s": times,
                      "cpu_s": statistics.median(cpu), "peak_mb": _rss_mb("VmHWM"), "base_mb": base}))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child_main(sys.argv[2:])
