"""DPO with TRL's ``DPOTrainer`` on chosen/rejected agent turns (reference = the adapter-disabled policy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.recipes import TrainRecipe
from josh.training.config import base_arguments
from josh.training.model import lora_config


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import DPOConfig, DPOTrainer

    from josh.training.data import to_dataset
    from josh.training.memory import lean_loss_head

    args = DPOConfig(**base_arguments(recipe, output_dir), beta=recipe.dpo.beta, loss_type=[recipe.dpo.loss_type])
    lean_loss_head()
    return DPOTrainer(
        model=model,
        args=args,
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=lora_config(recipe.lora),
        callbacks=callbacks,
    )
