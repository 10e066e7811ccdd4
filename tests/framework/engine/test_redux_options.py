"""traiNNer-redux option files (framework/engine/config/redux_options.py): every template of the 13
architectures srgrad has (x fidelity, OTF_fidelity, gan, OTF_gan, and its test template), as
stand-ins written from their keys (redux_templates.py), translates into a valid srgrad config,
every key mapped or dropped with a note; each architecture then trains one step on the bundled
images (models shrunk, the patches tiny); srgrad-train reads such a file directly."""
import copy
import math
from pathlib import Path

import pytest
from PIL import Image

from framework.engine import Trainer
from framework import precision
from framework.engine.config.basicsr_options import is_basicsr_options
from framework.engine.config.options import translate_any, translate_options
from framework.engine.run.recipes.terms import loss_terms
from framework.engine.config.redux_archs import PRESETS
from framework.engine.config.redux_options import is_redux_options
from framework.engine.config.schema import load_config, validate
from framework.engine.config.testconfig import validate_test_config
from framework.engine.inference.zoo import load_zoo
from framework.io.config import ConfigError

from .redux_templates import ARCHS, BF16, KINDS, OTHER_PRESETS, dump, eval_template, train_template
from .test_gan import vgg  # noqa: F401  (the shallow VGG19 file fixture)

DATA = Path(__file__).resolve().parents[3] / "data"
# srgrad type -> keywords that shrink it to a few thousand weights (the step, not the size, is
# what the test trains)
SHRINK = {
    "DAT": {"embed_dim": 16, "depth": [1], "num_heads": [2], "split_size": [2, 4], "img_size": 8},
    "HAT": {"embed_dim": 12, "depths": [1], "num_heads": [2], "window_size": 4, "img_size": 8,
            "compress_ratio": 3, "squeeze_factor": 4, "num_feat": 8},
    "SwinIR": {"embed_dim": 12, "depths": [1], "num_heads": [2], "window_size": 4, "img_size": 8},
    "Swin2SR": {"embed_dim": 12, "depths": [1], "num_heads": [2], "window_size": 4, "img_size": 8},
    "RRDBNet": {"num_feat": 8, "num_block": 1, "num_grow_ch": 4},
    "RCAN": {"num_group": 1, "num_block": 1, "num_feat": 8, "squeeze_factor": 4},
    "OmniSR": {"num_feat": 8, "res_num": 1, "window_size": 4},
    "PLKSR": {"dim": 8, "n_blocks": 1, "kernel_size": 5},
    "RealPLKSR": {"dim": 8, "n_blocks": 1, "kernel_size": 5},
    "SAFMN": {"dim": 8, "n_blocks": 1},
    "SPAN": {"feature_channels": 8},
    "SRVGGNetCompact": {"num_feat": 8, "num_conv": 2},
    "RealCUGAN": {},
}


@pytest.fixture(scope="module", autouse=True)
def zoo():
    load_zoo()  # the registered models (srgrad-train loads them the same way)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """hr: two 64x64 crops of the bundled images; lr: their x4 bicubic downscales (16x16)."""
    root = tmp_path_factory.mktemp("redux_data")
    for sub in ("hr", "lr"):
        (root / sub).mkdir()
    for name in ("astronaut.png", "brick.png"):
        hr = Image.open(DATA / "train" / name).convert("RGB").crop((96, 96, 160, 160))
        hr.save(root / "hr" / name)
        hr.resize((16, 16), Image.BICUBIC).save(root / "lr" / name)
    return root


def _options(folders, arch, kind, **kw):
    hr, lr = str(folders / "hr"), str(folders / "lr")
    return train_template(arch, kind, hr, lr, hr, lr, **kw)


def _dropped_or_mapped(notes, key):
    return any(n.startswith(f"{key}: ") or n.startswith(f"{key} ->") for n in notes)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_training_template_translates(folders, arch, kind):
    options = _options(folders, arch, kind)
    assert is_basicsr_options(options) and is_redux_options(options)
    cfg, notes = translate_options(options, f"{arch}_{kind}.yml")
    if arch in BF16 and not precision.support().avx512_bf16:  # refused, with the reason
        with pytest.raises(ConfigError, match="train.precision: bf16 is not available"):
            validate(copy.deepcopy(cfg), f"{arch}_{kind}.yml")
        cfg["train"]["precision"] = "fp32"
    validate(cfg, f"{arch}_{kind}.yml")
    srgrad_type, preset = PRESETS[ARCHS[arch]["type"]]
    assert cfg["model"]["type"] == srgrad_type
    given = ARCHS[arch]  # the file's keywords (pro, layer_norm, ...) over the preset's
    assert {k: cfg["model"][k] for k in preset} == {k: given.get(k, v) for k, v in preset.items()}
    assert cfg["train"]["total_iters"] == 300 and cfg["train"]["batch_size"] == 2
    assert cfg["datasets"]["train"]["gt_size"] == 16  # lq_size 4 at scale 4
    assert cfg["datasets"]["val"] is None  # val_enabled: false
    for key in ("num_gpu", "use_channels_last", "use_compile", "fast_matmul", "use_amp",
                "amp_bf16", "datasets.train.num_worker_per_gpu", "logger.save_checkpoint_format"):
        assert _dropped_or_mapped(notes, key), (key, notes)
    if arch in BF16:  # use_amp + amp_bf16: bf16 training, as traiNNer-redux's
        assert "use_amp -> train.precision: bf16" in " ".join(notes)
        assert translate_options(options)[0]["train"]["precision"] == "bf16"
    terms = loss_terms(cfg["train"])
    if kind.endswith("gan"):
        assert cfg["model_d"]["type"] == "UNetDiscriminatorSN"
        assert [(t.spec["type"], t.gan) for t in terms] == [("PerceptualLoss", False),
                                                            ("GANLoss", True)]
        assert terms[0].spec["perceptual_weight"] == 0.02 and terms[1].spec["loss_weight"] == 0.05
        assert "train.losses: the traiNNer-redux losses srgrad lacks, left out of the run: " \
               "mssimloss, hsluvloss" in notes
        assert cfg["train"]["pretrained"] == {"path": "pretrained/ours.pth", "key": None,
                                              "strict": True}
        assert cfg["train"]["ema_power"] == 10.0 and cfg["train"]["ema_decay"] == 0.99
    else:
        assert "model_d" not in cfg and cfg["train"]["ema_power"] == 0.5
        assert [t.spec for t in terms] == [{"type": "CharbonnierLoss", "loss_weight": 1.0,
                                            "eps": 1e-6}]
    block = cfg["datasets"]["train"]
    if kind.startswith("OTF"):
        assert block["type"] == "RealESRGANDataset" and block["crop_pad_size"] == 48
        assert block["kernel_range"] == block["kernel_range2"] == block["final_kernel_range"] \
            == [7, 9] and "blur_kernel_size" not in block
        assert block["blur_prob"] == block["second_blur_prob"] == 0.0
        assert block["jpeg_prob"] == block["jpeg_prob2"] == 1.0
        assert block["jpeg_range"] == [80, 95] and block["resize_range2"] == [0.7, 1.1]
        assert block["resize_mode_list3"] == ["bilinear", "bicubic", "nearest-exact", "lanczos"]
        assert block["resize_mode_prob3"] == [0.1, 0.2, 0.3, 0.4]
    else:
        assert block["type"] == "PairedImageDataset" and block["lq_root"] == str(folders / "lr")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_test_template_translates(folders, arch):
    options = eval_template(arch, str(folders / "lr"), "weights/ours.safetensors")
    cfg, notes, kind = translate_any(options, f"{arch}.yml")
    assert kind == "test"
    cfg = validate_test_config(cfg, f"{arch}.yml")
    assert cfg["model"]["type"] == PRESETS[ARCHS[arch]["type"]][0]
    assert cfg["weights"] == {"path": "weights/ours.safetensors", "key": None}
    assert cfg["val"]["metrics"] == [] and cfg["val"]["save_images"] is True


@pytest.mark.parametrize("preset", OTHER_PRESETS)
def test_the_other_presets_translate_with_their_sizes(folders, preset):
    options = _options(folders, "SPAN", "fidelity")
    options["network_g"] = {"type": preset.upper() if preset == "dat_2" else preset}
    cfg, _ = translate_options(options)
    validate(cfg)
    srgrad_type, values = PRESETS[preset]
    assert cfg["model"] == {"type": srgrad_type, **values}


@pytest.mark.parametrize("arch", ARCHS)
def test_each_architecture_trains_a_step_from_its_template(folders, tmp_path, vgg,  # noqa: F811
                                                           arch):
    """One template per architecture (the kinds in turn) trains one iteration: the model shrunk,
    the patches 8 px (LR); in the GAN kinds the perceptual term reads the shallow test VGG."""
    kind = KINDS[list(ARCHS).index(arch) % len(KINDS)]
    cfg, notes = translate_options(_options(folders, arch, kind, lq_size=8))
    cfg["model"].update(SHRINK[cfg["model"]["type"]])
    cfg["train"].update(total_iters=1, batch_size=2, precision="fp32")  # bf16: tests/.../test_bf16.py
    cfg["train"].pop("pretrained", None)  # the template's pretrain path is a placeholder
    cfg.update(run_root=str(tmp_path / "runs"), dtype="float32")
    for entry in cfg["train"]["losses"]:
        if entry["type"] == "PerceptualLoss":
            entry.update(weights=str(vgg[0]), layer_weights={"conv1_2": 0.1, "conv2_2": 0.1})
    if "model_d" in cfg:
        cfg["model_d"]["num_feat"] = 4
    t = Trainer(validate(cfg, f"{arch}_{kind}"), progress=False)
    t.fit()
    assert t.iteration == 1
    run = tmp_path / "runs" / cfg["name"]
    rows = (run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 2 and math.isfinite(float(rows[1].split(",")[2]))  # the step's loss
    assert (run / "net_latest.safetensors").exists() or any(run.rglob("*.safetensors"))


def test_srgrad_train_reads_a_template_directly(folders, tmp_path):
    """load_config (srgrad-train's) on the file: translated on the fly, said in the notes, and
    --set uses srgrad's keys."""
    path = tmp_path / "SPAN_fidelity.yml"
    path.write_text(dump(_options(folders, "SPAN", "fidelity")))
    notes = []
    cfg = load_config(path, ["train.total_iters=1", "model.feature_channels=8",
                             f"run_root={tmp_path / 'runs'}"], notes=notes)
    assert notes[0].startswith(f"{path} is a traiNNer-redux option file: translated")
    assert cfg["model"] == {"type": "SPAN", "feature_channels": 8, "num_blocks": 6, "norm": False}
    Trainer(cfg, progress=False).fit()
    assert (tmp_path / "runs" / "x4_SPAN_fidelity" / "metrics.csv").exists()


@pytest.mark.parametrize("change,message", [
    (lambda o: o["datasets"]["train"].update(accum_iter=4),
     "datasets.train.accum_iter: 4: srgrad has no gradient accumulation"),
    (lambda o: o["network_g"].update(type="lmlt"), "network_g.type: 'lmlt': not among the"),
    (lambda o: o["train"].update(use_moa=True), "train.use_moa: True: srgrad has no such option"),
    (lambda o: o["network_g"].update(start_unshuffle=2), "network_g.start_unshuffle: 2: srgrad's"),
    (lambda o: o.update(thicklines_prob=0.5), "thicklines_prob: 0.5: traiNNer-redux's, not in"),
    (lambda o: o["train"]["losses"][0].update(criterion="fd"),
     "train.losses[0].criterion: 'fd': srgrad's PerceptualLoss compares"),
    (lambda o: o["train"].update(total_iter=1.5), "train.total_iter: expected a whole number"),
    (lambda o: o["train"].update(ema_decay="high"), "train.ema_decay: expected a number"),
    (lambda o: o["train"]["losses"][0].update(loss_weight=-1.0),
     "train.losses[0].loss_weight: -1.0: a negative weight"),
])
def test_what_srgrad_cannot_honour_is_refused_by_key(folders, change, message):
    kind = "OTF_fidelity" if "thicklines" in message else "fidelity"
    options = _options(folders, "SwinIR" if "unshuffle" in message else "SPAN", kind)
    if "criterion" in message:
        options["train"]["losses"][0] = {"type": "perceptualloss", "loss_weight": 1.0}
    change(options)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        translate_options(options, "x.yml")


def test_the_switches_and_clipping_map_to_srgrads_keys(folders):
    options = _options(folders, "SPAN", "fidelity")
    options["train"].update(grad_clip=True, grad_clip_max_norm=7)
    options["manual_seed"] = 11
    options["val"].update(val_enabled=True, tile_size=32)
    cfg, notes = translate_options(options)
    cfg = validate(cfg)
    assert cfg["train"]["grad_clip"] == 7.0 and cfg["seed"] == 11
    assert cfg["val"]["tile"] == 32 and cfg["val"]["tile_overlap"] == 4
    assert cfg["val"]["metrics"] == ["psnr", "ssim"] and cfg["val"]["crop_border"] == 2
    assert cfg["datasets"]["val"]["gt_root"] == str(folders / "hr")


def test_a_basicsr_file_is_not_taken_for_a_redux_one():
    basicsr = {"name": "x", "model_type": "SRModel", "scale": 2,
               "network_g": {"type": "MSRResNet"}, "train": {"pixel_opt": {"type": "L1Loss"}}}
    assert is_basicsr_options(basicsr) and not is_redux_options(basicsr)
    srgrad = {"name": "x", "scale": 2, "model": {"type": "SPAN"},
              "train": {"losses": [{"type": "L1Loss"}]}}
    assert not is_basicsr_options(srgrad) and not is_redux_options(srgrad)
    assert is_redux_options({"network_g": {"type": "RRDBNet"}, "use_amp": False})


def test_the_paths_note_leaves_out_what_set_gives(folders, tmp_path):
    """The translation's "paths used as written" names only the paths the file gave and --set
    did not replace (before: the file's values, whatever --set said)."""
    path = tmp_path / "SPAN_fidelity.yml"
    path.write_text(dump(_options(folders, "SPAN", "fidelity")))
    hr = str(folders / "hr")

    def paths_note(overrides):
        notes = []
        cfg = load_config(path, overrides, notes=notes)
        return cfg, [n for n in notes if n.startswith("paths used as written")]

    _, said = paths_note([])
    assert said == [f"paths used as written (relative to the current folder, edit them to your "
                    f"data): datasets.train.gt_root={hr}, datasets.train.lq_root={folders / 'lr'}"]
    cfg, said = paths_note([f"datasets.train.lq_root={hr}"])
    assert cfg["datasets"]["train"]["lq_root"] == hr
    assert said == [f"paths used as written (relative to the current folder, edit them to your "
                    f"data): datasets.train.gt_root={hr} (--set gives datasets.train.lq_root)"]
    _, said = paths_note([f"datasets.train.lq_root={hr}", f"datasets.train.gt_root={hr}"])
    assert said == []


def test_srgrad_eval_runs_a_test_template_directly(folders, tmp_path, capsys):
    """srgrad-eval on traiNNer-redux's test template: its preset built, the weights read (no param
    key: the file's own), the LR images upscaled into <results>/<name>/ (metrics_enabled: false)."""
    from framework.engine.commands.cli import eval_main
    from framework.nn import init
    from framework.registry import MODELS
    from framework.weights import write_pth
    init.manual_seed(0)
    model = MODELS.build({"type": PRESETS["span"][0], **PRESETS["span"][1], "scale": 4})
    write_pth(tmp_path / "net_g.pth", {"params": model.state_dict()})
    path = tmp_path / "SPAN.yml"
    path.write_text(dump(eval_template("SPAN", str(folders / "lr"), str(tmp_path / "net_g.pth"))))
    assert eval_main([str(path), "--results", str(tmp_path / "results"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert f"{path} is a traiNNer-redux test option file: translated" in out + err
    assert "note: use_amp: dropped, srgrad-eval runs in float32" in err
    folder = tmp_path / "results" / "x4_SPAN" / "visualization" / "val"
    assert sorted(p.name for p in folder.iterdir()) == ["astronaut_x4_SPAN.png",
                                                        "brick_x4_SPAN.png"]
    assert Image.open(folder / "brick_x4_SPAN.png").size == (64, 64)


def test_a_discriminator_trains_only_with_a_gan_loss_as_in_redux(folders):
    """traiNNer-redux's rule: the first ganloss with a loss_weight makes a GAN run; network_d
    without one is not built, and a ganloss without network_d is an error."""
    options = _options(folders, "SPAN", "gan")
    options["train"]["losses"][3]["loss_weight"] = 0
    cfg, notes = translate_options(options)
    assert "model_d" not in cfg and "optimizer_d" not in cfg["train"]
    assert "network_d: dropped, no ganloss with a loss_weight: traiNNer-redux builds no " \
           "discriminator then" in notes
    assert validate(cfg)["recipe"] is None
    options = _options(folders, "SPAN", "gan")
    del options["network_d"]
    with pytest.raises(ConfigError, match="network_d: missing: a ganloss with a loss_weight"):
        translate_options(options)


def test_srgrad_convert_writes_a_config_that_loads_as_written(folders, tmp_path, capsys):
    """srgrad-convert options on an OTF GAN template: a commented srgrad config naming its source,
    which load_config reads back to the same resolved config as the on-the-fly translation."""
    from framework.engine.commands.convert import main as convert_main
    src = tmp_path / "SwinIR_OTF_gan.yml"
    src.write_text(dump(_options(folders, "SwinIR", "OTF_gan")))
    out = tmp_path / "swinir.yaml"
    assert convert_main(["options", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(f"# Translated from the traiNNer-redux option file {src} by "
                           f"srgrad-convert options.")
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{src} -> {out} (")
    written, direct = load_config(out), load_config(src)
    assert written == direct
    assert [e["type"] for e in written["train"]["losses"]] == ["PerceptualLoss", "GANLoss"]


def test_folder_lists_are_read_as_traiNNer_redux_reads_them(folders, tmp_path):
    """dataroot_gt / dataroot_lq lists (the templates list two folders): every folder's images,
    the LR partners of gt[i]'s in lq[i]; the OTF crop_pad_size rounded up to the scale."""
    from framework.registry import DATASETS
    hr2, lr2 = tmp_path / "hr2", tmp_path / "lr2"
    hr2.mkdir()
    lr2.mkdir()
    Image.open(folders / "hr" / "brick.png").save(hr2 / "third.png")
    Image.open(folders / "lr" / "brick.png").save(lr2 / "third.png")
    options = _options(folders, "SPAN", "fidelity")
    options["datasets"]["train"].update(dataroot_gt=[str(folders / "hr"), str(hr2)],
                                        dataroot_lq=[str(folders / "lr"), str(lr2)])
    cfg = validate(translate_options(options)[0])
    block = cfg["datasets"]["train"]
    assert block["gt_root"] == [str(folders / "hr"), str(hr2)]
    data = DATASETS.build(block, scale=4)
    assert data.names == ["astronaut.png", "brick.png", "third.png"]
    assert data.lq_paths[2] == lr2 / "third.png"
    with pytest.raises(ValueError, match=r"gt_root lists 2 folder\(s\) and lq_root 1"):
        DATASETS.build({**block, "lq_root": [str(folders / "lr")]}, scale=4)
    otf = _options(folders, "SPAN", "OTF_fidelity")
    otf["scale"] = 3
    otf["datasets"]["train"]["dataroot_gt"] = [str(folders / "hr"), str(hr2)]
    cfg = validate(translate_options(otf)[0])
    assert cfg["datasets"]["train"]["crop_pad_size"] == 45  # 12 + 32 = 44 -> 45, a multiple of 3
    assert DATASETS.build(cfg["datasets"]["train"], scale=3).names == [
        "astronaut.png", "brick.png", "third.png"]
