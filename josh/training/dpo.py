"""DPO with TRL's ``DPOTrainer`` on chosen/rejected agent turns (reference = the adapter-disabled policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, trl_trainer, with_trl
from josh.training.recipe import TrainRecipe


def arguments(recipe: TrainRecipe, output_dir: Path) -> dict[str, Any]:
    """The ``DPOConfig`` keyword arguments josh sets."""
    return {**base_arguments(recipe, output_dir), "beta": recipe.dpo.beta, "loss_type": [recipe.dpo.loss_type]}


def config(recipe: TrainRecipe, output_dir: Path) -> Any:
    """TRL's ``DPOConfig`` of the recipe, its ``dpo.trl`` arguments included."""
    from trl import DPOConfig  # optional: the train extra

    return DPOConfig(**with_trl(recipe, arguments(recipe, output_dir)))


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import DPOTrainer  # optional: the train extra

    return trl_trainer(DPOTrainer, recipe, config(recipe, output_dir), rows, model, tokenizer, callbacks)
