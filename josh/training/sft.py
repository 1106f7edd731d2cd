"""Supervised fine-tuning with TRL's ``SFTTrainer``: whole conversations, loss on assistant tokens only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, trl_trainer, with_trl
from josh.training.recipe import TrainRecipe


def arguments(recipe: TrainRecipe, output_dir: Path) -> dict[str, Any]:
    """The ``SFTConfig`` keyword arguments josh sets."""
    sft = recipe.sft
    return {
        **base_arguments(recipe, output_dir),
        "assistant_only_loss": sft.assistant_only_loss,
        "packing": sft.packing,
    }


def config(recipe: TrainRecipe, output_dir: Path) -> Any:
    """TRL's ``SFTConfig`` of the recipe, its ``sft.trl`` arguments included."""
    from trl import SFTConfig  # optional: the train extra

    return SFTConfig(**with_trl(recipe, arguments(recipe, output_dir)))


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import SFTTrainer  # optional: the train extra

    args = config(recipe, output_dir)
    return trl_trainer(SFTTrainer, recipe, args, rows, model, tokenizer, callbacks, peft=not recipe.model.adapter)
