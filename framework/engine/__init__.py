"""The application behind the commands, one room per job (docs/architecture.md draws them):
commands/ (the command lines), config/ (what a config holds: schema, translators of other trainers'
option files), run/ (one training run: the Trainer loop and the recipes), inference/ (a model on
images: tiles, autotile, TTA, video, which model a file is), hub/ (models and data sets by name),
zeroshot/ (ZSSR, KernelGAN). This face re-exports what scripts use most: `load_config`, `Trainer`,
`load_model`, `build_model`, tiled `upscale`. inference/zoo.py's `load_zoo()` is the one place that
imports the model zoo (`models/`)."""
from .inference.upscale import bicubic, upscale, upscale_file
from .inference.loading import build_model, load_model
from .config.schema import load_config, parse_config
from .run.trainer import Trainer, TrainingError, TrainingInterrupted, find_latest_checkpoint

__all__ = ["Trainer", "TrainingError", "TrainingInterrupted", "find_latest_checkpoint", "bicubic",
           "build_model", "load_model", "upscale", "upscale_file", "load_config", "parse_config"]
