"""framework.random: the one global generator. Seeding pins weights (the same as before it existed)
and masks; nn.init and the dropout masks draw from it; bad seeds are clear errors."""
import numpy as np
import pytest

import framework as sg
import framework.functional as F
from framework import nn, random
from framework.nn import init


def test_seeded_conv_weights_are_pinned():
    """init.manual_seed(7) then nn.Conv2d(3, 4, 3): the values drawn before framework.random existed
    (init kept its own np.random.default_rng(seed)); framework.manual_seed is the same call."""
    for seed in (init.manual_seed, sg.manual_seed):
        seed(7)
        conv = nn.Conv2d(3, 4, 3)
        assert conv.weight.data[1, 2, 0, 1] == np.float32(-0.15723341703414917)
        assert conv.bias.data[3] == np.float32(0.15749318897724152)


def test_manual_seed_is_default_rng_of_the_seed():
    gen = sg.manual_seed(11)
    assert gen is random.default_generator()
    np.testing.assert_array_equal(gen.random(5), np.random.default_rng(11).random(5))
    random.manual_seed([3, 4])  # a sequence, e.g. (run seed, iteration)
    np.testing.assert_array_equal(random.default_generator().random(3),
                                  np.random.default_rng([3, 4]).random(3))


def test_init_and_dropout_share_the_stream():
    """A weight init and a dropout mask both advance the one generator: after the same seed and the
    same calls, the same values; a skipped call shifts what follows."""
    def run(with_dropout):
        sg.manual_seed(5)
        x = sg.tensor(np.ones((4, 8), np.float32))
        mask = F.dropout(x, 0.5).data if with_dropout else None
        return mask, nn.Conv2d(3, 2, 1).weight.data.copy()

    m1, w1 = run(True)
    m2, w2 = run(True)
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(w1, w2)
    _, w3 = run(False)
    assert not np.array_equal(w1, w3)


def test_reseeding_per_iteration_resumes_exactly():
    x = sg.tensor(np.ones((3, 50), np.float32))
    masks = []
    for it in range(3):
        sg.manual_seed([1, it])
        masks.append(F.dropout(x, 0.3).data)
    sg.manual_seed([1, 2])  # resume at iteration 2
    np.testing.assert_array_equal(F.dropout(x, 0.3).data, masks[2])
    assert not np.array_equal(masks[0], masks[1])


@pytest.mark.parametrize("seed", [1.5, "7", None, True, [], [1, 2.0]])
def test_bad_seed_type(seed):
    with pytest.raises(TypeError, match="manual_seed: seed must be an int or a sequence of ints"):
        sg.manual_seed(seed)


def test_negative_seed():
    with pytest.raises(ValueError, match=r"manual_seed: seed must be non-negative, got \[1, -2\]"):
        sg.manual_seed([1, -2])
