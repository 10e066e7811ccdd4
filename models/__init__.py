"""SR architectures, one per file, registered in framework.registry.MODELS, each with the `detect`
rule that recognises its checkpoints (run by framework/detect.py). The GAN discriminators
(models/discriminators.py) register in MODELS too, as BasicSR's ARCH_REGISTRY holds both, and so do
KernelGAN's two networks (models/kernelgan.py: a kernel estimator's downscaler and its discriminator);
`__all__` lists the generators (the models that upscale and that detect() knows). Each model's
facts (channels, scale, role, size requirements, parameters) are its card (framework/card.py:
`card(spec)`, the staticmethod beside its detect rule), not lists of names here."""
from .srcnn import SRCNN
from .fsrcnn import FSRCNN
from .espcn import ESPCN
from .vdsr import VDSR
from .edsr import EDSR
from .upsample_net import UpsampleNet
from .srvgg import SRVGGNetCompact
from .msrresnet import MSRResNet
from .rrdbnet import RRDBNet
from .rcan import RCAN
from .swinir import SwinIR
from .hat import HAT
from .swin2sr import Swin2SR
from .dat import DAT
from .span import SPAN
from .plksr import PLKSR
from .realplksr import RealPLKSR
from .realcugan import RealCUGAN
from .safmn import SAFMN
from .omnisr import OmniSR
from .drct import DRCT
from .mosr import MoSR
from .swiftsrgan import SwiftSRGAN
from .nafnet import NAFNet
from .drunet import DRUNet
from .scunet import SCUNet
from .mmrealsr import MMRealSR
from .grl import GRL
from .rgt import RGT
from .craft import CRAFT
from .atd import ATD
from .dncnn import DnCNN
from .fbcnn import FBCNN
from .uformer import Uformer
from .kbnet import KBNet
from .ditn import DITN
from .seemore import SeemoRe
from .dctlsa import DCTLSA
from .moesr import MoESR
from .fdat import FDAT
from .safmn_bcie import SAFMNBCIE
from .zssr import ZSSRNet
from .discriminators import UNetDiscriminatorSN, VGGStyleDiscriminator
from .kernelgan import KernelGANDiscriminator, KernelGANGenerator

__all__ = ["SRCNN", "FSRCNN", "ESPCN", "VDSR", "EDSR", "UpsampleNet", "SRVGGNetCompact",
           "MSRResNet", "RRDBNet", "RCAN", "SwinIR", "HAT", "Swin2SR", "DAT", "SPAN", "PLKSR",
           "RealPLKSR", "RealCUGAN", "SAFMN", "OmniSR", "DRCT", "MoSR", "SwiftSRGAN", "NAFNet",
           "DRUNet", "SCUNet", "MMRealSR", "GRL", "RGT", "CRAFT", "ATD", "DnCNN", "FBCNN",
           "Uformer", "KBNet", "DITN", "SeemoRe", "DCTLSA", "MoESR", "FDAT", "SAFMNBCIE",
           "ZSSRNet"]
