"""Training and inference engine: the config schema (`load_config`), `Trainer` (the loop behind
srgrad-train; what one step is belongs to the config's recipe, engine/recipes), tiled `upscale`, and
the command lines in `cli` (srgrad-train, srgrad-infer, srgrad-eval). `zoo.load_zoo()` is the one
place that imports the model zoo (`models/`)."""
from .inference import bicubic, upscale, upscale_file
from .loading import build_model, load_model
from .schema import load_config, parse_config
from .trainer import Trainer, TrainingError, TrainingInterrupted, find_latest_checkpoint

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint", "bicubic",
           "build_model", "load_model", "upscale", "upscale_file", "load_config", "parse_config"]
