"""scripts/profile_ops.py: each op of a captured graph timed, the rows inside the call's total, the
lowered ops named (a float32 direct conv's packed forward), backward times only for a step."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
profile_ops = pytest.importorskip("profile_ops")


@pytest.mark.parametrize("step", [False, True])
def test_an_espcn_graph_op_by_op(step):
    total, rows = profile_ops.breakdown("ESPCN", step=step, size=24, precision="fp32", repeat=2)
    names = [r[0] for r in rows.values()]
    assert total > 0 and len(rows) >= 4  # ESPCN: 3 convs, a pixel shuffle (and tanh activations)
    assert sum(r[2] + r[3] for r in rows.values()) <= total
    assert all(r[2] > 0 for r in rows.values())
    assert any(r[3] > 0 for r in rows.values()) == step
    conv = [n for n in names if "_conv2d" in n or "Conv2dFunction" in n]
    assert len(conv) == 3, names
    if not step:  # inference: the float32 direct convs' lowering (weights packed once)
        assert all(n.startswith("_conv2d") for n in conv), names


def test_openvinos_own_counters_on_the_same_export():
    pytest.importorskip("openvino", reason="openvino: a benchmark-only peer, not installed")
    total, rows = profile_ops.openvino_layers("ESPCN", size=24, precision="fp32", repeat=2)
    kinds = [r[1] for r in rows]
    assert total > 0 and all(r[3] > 0 for r in rows)
    assert kinds.count("Convolution") == 3, rows  # ESPCN's three convs, each a layer of its own
