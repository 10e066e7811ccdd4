import numpy as np
import pytest

import framework as sg
from tests.conftest import t64


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)),
                                   ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_gradcheck_and_values(sa, sb, rng):
    a, b = t64(rng, *sa), t64(rng, *sb)
    assert sg.gradcheck(lambda x, y: x @ y, (a, b))
    assert np.allclose((a @ b).numpy(), a.numpy() @ b.numpy())


def test_matmul_errors(rng):
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(3, 2\) do not align \(4 != 3\)"):
        t64(rng, 3, 4) @ t64(rng, 3, 2)


def test_matmul_parity_with_torch(rng):
    torch = pytest.importorskip("torch")
    a, b = t64(rng, 2, 3, 4), t64(rng, 4, 5)
    (a @ b).sum().backward()
    ta, tb = torch.tensor(a.numpy(), requires_grad=True), torch.tensor(b.numpy(), requires_grad=True)
    (ta @ tb).sum().backward()
    assert np.allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    assert np.allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)
