"""PyTorch twins of the traiNNer-redux-era architectures MoESR, FDAT and SAFMN-BCIE: spandrel 0.4.2's
own network classes (the originals as chaiNNer and ComfyUI run them), built with srgrad's keywords
(the same keyword names).
Imported lazily through tests/twins/_spandrel.spandrel_architecture, which skips with the reason
when spandrel 0.4.2 is absent."""
from __future__ import annotations

from . import register
from ._spandrel import spandrel_architecture


@register
def MoESR(**kw):  # noqa: N802 (the srgrad model's name)
    return spandrel_architecture("MoESR").MoESR(**kw)


def cpu_dysample(network):
    """`network` with each of FDAT's own DySample modules running the forward of spandrel's shared
    DySample (__arch_helpers/dysample.py): the same computation, but FDAT's asks torch for pinned
    memory (`pin_memory=True`), which a CPU-only torch refuses."""
    import types
    from spandrel.architectures.__arch_helpers.dysample import DySample
    own = spandrel_architecture("FDAT").__dict__.get("DySample")
    if own is None:
        from spandrel.architectures.FDAT.__arch.fdat import DySample as own
    for m in network.modules():
        if isinstance(m, own):
            m.forward = types.MethodType(DySample.forward, m)
    return network


@register
def FDAT(**kw):  # noqa: N802
    return cpu_dysample(spandrel_architecture("FDAT").FDAT(**kw))


@register
def SAFMNBCIE(scale=1, **kw):  # noqa: N802 (srgrad's scale: 1, which the original has not)
    return spandrel_architecture("SAFMNBCIE").SAFMNBCIE(**kw)
