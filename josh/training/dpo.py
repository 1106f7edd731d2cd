"""DPO with TRL's ``DPOTrainer`` on chosen/rejected agent turns (reference = the adapter-disabled policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, trl_trainer
from josh.training.recipe import TrainRecipe


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import DPOConfig, DPOTrainer  # optional: the train extra

    args = DPOConfig(**base_arguments(recipe, output_dir), beta=recipe.dpo.beta, loss_type=[recipe.dpo.loss_type])
    return trl_trainer(DPOTrainer, recipe, args, rows, model, tokenizer, callbacks)
