"""Every weights format srgrad reads or writes, and its one error type (CheckpointError):

- checkpoint.py: srgrad's safetensors files (training checkpoints, weights files with their model
  spec), plain safetensors files, and `load_weights`, which takes any of them or a `.pth`;
- pth.py (+ _pickle_machine.py): PyTorch `.pth`/`.pt` files read without torch and without running
  code from the file; pth_write.py: `.pth` files written for BasicSR and PyTorch users;
- serialization.py: `save`/`load` for any state_dict-like object (framework.save / framework.load);
- loading.py: `load_into`, the one path from a weights file into a built model (strict, or what
  fits; another repository's key layout of the model mapped first).
"""
from .checkpoint import (CHECKPOINT_FORMAT, WEIGHT_GROUPS, check_state_matches, file_format,
                         is_pytorch_file, load_checkpoint, load_weights, read_safetensors,
                         save_checkpoint, save_weights)
from .errors import CheckpointError
from .loading import load_into
from .pth import load_pth_state_dict, read_pth
from .pth_write import write_pth
from .serialization import load, save

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "save_weights", "load_weights",
           "load_into", "read_safetensors", "check_state_matches", "is_pytorch_file",
           "file_format", "CHECKPOINT_FORMAT", "WEIGHT_GROUPS", "read_pth", "load_pth_state_dict",
           "write_pth", "save", "load"]
