"""Every weights format srgrad reads or writes, and its one error type (CheckpointError):

- checkpoint.py: srgrad's safetensors files (training checkpoints, weights files with their model
  spec), plain safetensors files, and `load_weights`, which takes any of them or a `.pth`;
- pth.py (+ _pickle_machine.py): PyTorch `.pth`/`.pt` files read without torch and without running
  code from the file; pth_write.py: `.pth` files written for BasicSR and PyTorch users;
- serialization.py: `save`/`load` for any state_dict-like object (framework.save / framework.load).

Putting a file into a built model is framework/loading.py's `load_into`, a floor above this one: it
runs the models' detect rules (framework/detect.py), which build networks, while nn/ reads weights
files through this package (a perceptual loss's VGG): weights/ imports nothing of nn/ or detect.
"""
from .checkpoint import (CHECKPOINT_FORMAT, WEIGHT_GROUPS, check_state_matches, file_format,
                         is_pytorch_file, load_checkpoint, load_weights, read_safetensors,
                         save_checkpoint, save_weights)
from .errors import CheckpointError
from .pth import load_pth_state_dict, read_pth
from .pth_write import write_pth
from .serialization import load, save

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "save_weights", "load_weights",
           "read_safetensors", "check_state_matches", "is_pytorch_file",
           "file_format", "CHECKPOINT_FORMAT", "WEIGHT_GROUPS", "read_pth", "load_pth_state_dict",
           "write_pth", "save", "load"]
