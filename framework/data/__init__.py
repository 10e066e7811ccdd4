"""SR data: datasets (registered in DATASETS), paired crop / augmentation, the seeded loader."""
from .augment import apply_flags, augment, paired_random_crop, random_flags
from .datasets import HRImageDataset, PairedImageDataset, mod_crop
from .loader import BatchLoader

__all__ = ["HRImageDataset", "PairedImageDataset", "BatchLoader", "mod_crop", "augment",
           "paired_random_crop", "random_flags", "apply_flags"]
