"""Zero-shot SR without weights: zssr.py (srgrad-zssr: ZSSR end to end) and kernelgan.py
(KernelGAN's kernel estimator)."""
