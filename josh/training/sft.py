"""Supervised fine-tuning with TRL's ``SFTTrainer``: whole conversations, loss on assistant tokens only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.recipes import TrainRecipe
from josh.training.config import base_arguments
from josh.training.model import lora_config


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import SFTConfig, SFTTrainer

    from josh.training.data import to_dataset
    from josh.training.memory import lean_loss_head

    args = SFTConfig(
        **base_arguments(recipe, output_dir),
        assistant_only_loss=recipe.sft.assistant_only_loss,
        packing=recipe.sft.packing,
    )
    lean_loss_head()
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=None if recipe.model.adapter else lora_config(recipe.lora),
        callbacks=callbacks,
    )
