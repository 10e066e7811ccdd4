"""torch.utils's spelling: framework.utils.data holds Dataset, TensorDataset, Subset, random_split,
ConcatDataset and DataLoader (framework.data's)."""
from . import data

__all__ = ["data"]
