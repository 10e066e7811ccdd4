"""Training recipes (registered in framework.registry.RECIPES): what one optimisation step is, as
BasicSR's models (base.py says what a recipe is and how to add one). `recipe_name(cfg)` is the
one a config trains with."""
from ....registry import RECIPES
from .base import NonFinite, Recipe, config_key, total
from .fbcnn import FBCNNRecipe
from .gan import GANRecipe
from .sr import SRRecipe
from .zssr import ZSSRRecipe

__all__ = ["Recipe", "SRRecipe", "GANRecipe", "ZSSRRecipe", "FBCNNRecipe", "NonFinite", "config_key", "total", "recipe_name",
           "DEFAULT"]

DEFAULT = "sr"


def recipe_name(cfg: dict) -> str:
    """The recipe `cfg` trains with: its `recipe:` when given, else the one registered recipe that
    claims it (gan: a config with model_d; zssr: a ZSSRDataset; fbcnn: train.losses.qf), else sr.
    ValueError when several
    claim it."""
    if cfg.get("recipe"):
        return cfg["recipe"]
    claimed = [name for name in RECIPES.names() if RECIPES.get(name).claims(cfg)]
    if len(claimed) > 1:
        raise ValueError(f"the config sets the keys of several recipes ({', '.join(claimed)}): "
                         f"say which one trains with recipe: NAME")
    return claimed[0] if claimed else DEFAULT
