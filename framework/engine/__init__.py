"""Training and inference engine: `Trainer` (the loop behind srgrad-train), tiled `upscale`, and the
command lines in `cli` (srgrad-train, srgrad-infer, srgrad-eval)."""
from .inference import bicubic, build_model, load_model, upscale, upscale_file
from .trainer import Trainer, TrainingError, TrainingInterrupted, find_latest_checkpoint

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint", "bicubic",
           "build_model", "load_model", "upscale", "upscale_file"]
