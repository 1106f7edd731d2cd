"""Supervised fine-tuning with TRL's ``SFTTrainer``: whole conversations, loss on assistant tokens only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, trl_trainer
from josh.training.recipe import TrainRecipe


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import SFTConfig, SFTTrainer  # optional: the train extra

    args = SFTConfig(
        **base_arguments(recipe, output_dir),
        assistant_only_loss=recipe.sft.assistant_only_loss,
        packing=recipe.sft.packing,
    )
    return trl_trainer(SFTTrainer, recipe, args, rows, model, tokenizer, callbacks, peft=not recipe.model.adapter)
