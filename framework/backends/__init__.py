"""torch.backends's switches that scripts set before training (`torch.backends.cudnn.benchmark =
True`, `import torch.backends.cudnn as cudnn`, `torch.backends.cuda.matmul.allow_tf32 = True`):
accepted and without effect, since srgrad has no cuDNN or CUDA (its kernels are deterministic on
the CPU)."""
from types import SimpleNamespace

from . import cudnn

cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=True),
                       is_built=lambda: False)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)

__all__ = ["cudnn", "cuda", "mps"]
