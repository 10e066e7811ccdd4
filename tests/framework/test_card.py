"""framework/card.py's preflight: a spec too large for the machine is refused in one line naming
the keyword, before anything is allocated (issue 37.7: these ended in MemoryError tracebacks,
np.empty running before the parameter budget counted), through MODELS.build, a config, a weights
file's budget and srgrad-export."""
from __future__ import annotations

import tracemalloc

import pytest

import framework.card as card_module
import models  # noqa: F401  registers the architectures
from framework.card import SpecTooLarge, card, full_spec, preflight
from framework.registry import MODELS
from tests.models.cases import card_cases

GIB = 2 ** 30


@pytest.fixture
def machine(monkeypatch):
    """A 16 GiB machine, whatever this one has (the refusals do not depend on the test host)."""
    monkeypatch.setattr(card_module, "memory_bytes", lambda: 16 * GIB)


def _refused(spec) -> str:
    """MODELS.build(spec)'s one-line refusal, checked to allocate (almost) nothing."""
    tracemalloc.start()
    try:
        with pytest.raises(SpecTooLarge) as err:
            MODELS.build(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2 ** 20, f"{peak} bytes allocated before the refusal"
    message = str(err.value)
    assert "\n" not in message and message.endswith("refused before building it")
    return message


@pytest.mark.parametrize("spec, key", [
    ({"type": "PLKSR", "dim": 10 ** 6}, "dim=1000000"),
    ({"type": "PLKSR", "kernel_size": 100001}, "kernel_size=100001"),
    ({"type": "RealPLKSR", "dim": 10 ** 6}, "dim=1000000"),
    ({"type": "RealPLKSR", "kernel_size": 100001}, "kernel_size=100001"),
    ({"type": "SAFMN", "dim": 36, "ffn_scale": 1e9}, "ffn_scale=1000000000.0"),
    ({"type": "OmniSR", "num_feat": 10 ** 6}, "num_feat=1000000"),
    ({"type": "OmniSR", "window_size": 10 ** 5}, "window_size=100000"),
    ({"type": "RealCUGAN", "in_channels": 10 ** 7}, "in_channels=10000000"),
    ({"type": "Swin2SR", "embed_dim": 10 ** 6, "scale": 1}, "embed_dim=1000000"),
    ({"type": "ESPCN", "scale": 10 ** 5}, "scale=100000"),
])
def test_the_reported_oversized_specs_are_refused_in_one_line(machine, spec, key):
    message = _refused(spec)
    assert message.startswith(f"{spec['type']} ({key}): ") and "16 GiB of memory" in message


def _inflated(spec):
    """(keyword, spec with that int keyword x 10^6) for every positive int keyword of `spec`."""
    for key, value in spec.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            yield key, {**spec, key: value * 10 ** 6}


FIRST = {}  # each model's first card case, every keyword given (the defaults filled in)
for _spec in card_cases():
    FIRST.setdefault(_spec["type"], full_spec(_spec))


@pytest.mark.parametrize("name", sorted(FIRST))
def test_every_model_inflated_is_refused_naming_the_keyword(machine, name):
    """Every registered model: each integer keyword of its first card case inflated a millionfold
    that its card says cannot fit is refused by MODELS.build, in one line naming it, with nothing
    allocated; at least one (its width) is."""
    refused = []
    for key, spec in _inflated(FIRST[name]):
        try:
            c = card(spec)
            too_large = 16 * c.parameters > 16 * GIB or 4 * c.largest_activation(1, 1) > 16 * GIB
        except (ValueError, TypeError, ArithmeticError, LookupError):
            continue  # keywords its constructor refuses
        if too_large:
            assert f"{key}={spec[key]}" in _refused(spec)
            refused.append(key)
    assert refused, f"{name}: no keyword of {FIRST[name]} inflated is refused"


def test_a_spec_that_fits_passes_and_a_file_budget_refuses_what_exceeds_it(machine):
    spec = {"type": "ESPCN", "scale": 2}
    assert preflight(spec).parameters == 26_796
    with pytest.raises(SpecTooLarge, match=r"^ESPCN: 2.68e\+04 parameters, more than the 1000 values "
                                           r"its weights allow: refused before building it$"):
        preflight(spec, limit=1000)
    assert preflight({"type": "ESPCN", "scale": "two"}) is None  # the constructor says why
    assert preflight({"type": "NoSuchNet"}) is None  # the registry says why


def test_the_largest_activation_of_the_smallest_input_is_counted_too(machine):
    """OmniSR's window 20000 fits as weights without pe, not as attention: 4 heads x 20000^2
    values per pixel over a 20000^2 padded input."""
    spec = {"type": "OmniSR", "pe": False, "window_size": 20000}
    assert 16 * card(spec).parameters < 16 * GIB
    assert "its largest activation" in _refused(spec)


def test_a_config_with_an_oversized_model_is_a_config_error(machine, tmp_path):
    from framework.engine.config.schema import load_config
    from framework.io.config import ConfigError
    path = tmp_path / "c.yaml"
    path.write_text("name: t\nscale: 2\nmodel: {type: PLKSR, dim: 1000000}\ndatasets:\n"
                    "  train: {type: HRImageDataset, root: data/train, gt_size: 32}\n"
                    "train: {total_iters: 1, batch_size: 2, optimizer: {type: Adam, lr: 2e-4}}\n")
    with pytest.raises(ConfigError, match=r"c.yaml: model: PLKSR \(dim=1000000\): .* refused "
                                          r"before building it"):
        load_config(path)


def test_srgrad_export_refuses_an_oversized_model_arg_in_one_line(machine, tmp_path, capsys):
    from framework.engine.commands.export import main
    from framework.nn import init
    from framework.weights import save_weights
    spec = {"type": "PLKSR", "dim": 8, "n_blocks": 1, "kernel_size": 5, "scale": 2}
    init.manual_seed(0)
    path = tmp_path / "p.safetensors"
    save_weights(path, MODELS.build(spec).state_dict(), model=spec, scale=2, dtype="float32")
    assert main(["--weights", str(path), "--output", str(tmp_path / "p.onnx"), "--model", "PLKSR",
                 "--model-arg", "dim=1000000", "--model-arg", "n_blocks=1"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dim=1000000" in err and "refused before building" in err


def test_the_check_before_building_leaves_the_init_stream_alone(monkeypatch):
    """EDSR's card builds one instance of a custom `block` to count it: on a scratch generator,
    so MODELS.build gives the weights it gave without the check."""
    import numpy as np
    from framework.nn import init
    spec = {"type": "EDSR", "scale": 2, "num_feat": 8, "num_block": 1, "block": {"type": "PReLU"}}
    init.manual_seed(0)
    checked = MODELS.build(spec)
    monkeypatch.setattr(MODELS, "preflight", None)
    init.manual_seed(0)
    plain = MODELS.build(spec)
    assert all(np.array_equal(a.data, b.data) for a, b in zip(checked.parameters(), plain.parameters()))


def test_counts_beyond_floats_range_still_print():
    """A card of inflated keywords can count more than a float holds (2 ** 2000000): its message
    printed it through float formatting, whose OverflowError read as "invalid keywords", so the
    spec was let through to its constructor."""
    from framework.card import _g, _gib
    assert _g(123456) == "1.235e+05" and _g(2.5) == "2.5"
    assert _g(2 ** 2000) == "1.148e+602" and _g(7 * 10 ** 5000) == "7e+5000"
    assert _g(2 ** 2000000) == "9.802e+602059"  # 602,060 digits: more than str() may print
    assert _gib(3 * 2 ** 5000) == "3.94e+1496 GiB" and _gib(2 ** 40) == "1.02e+03 GiB"
