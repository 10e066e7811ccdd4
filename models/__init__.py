"""SR architectures, one per file, registered in framework.registry.MODELS."""
from .srcnn import SRCNN
from .fsrcnn import FSRCNN
from .espcn import ESPCN
from .vdsr import VDSR
from .edsr import EDSR
from .upsample_net import UpsampleNet

__all__ = ["SRCNN", "FSRCNN", "ESPCN", "VDSR", "EDSR", "UpsampleNet"]
