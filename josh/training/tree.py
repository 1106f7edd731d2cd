"""The ``tree`` arm: advantage-weighted log-likelihood on sibling turns, with TRL's ``SFTTrainer`` carrying it.

Rows come from ``josh extract --format tree``: a prompt, one sibling turn as the completion and its advantage
(``josh.harvest.advantages``). TRL tokenizes them as prompt-completion conversations with the loss on the completion's
assistant tokens (tool results and feedback inside a turn carry none), and computes per-token log-probabilities
through its fused LM head. The one change is the loss: every token of a row is weighted by the row's advantage,

    loss = - sum_rows A_row * sum_tokens log p(token) / (labelled tokens in the accumulated batch),

the SFT loss with each row scaled by how much better than its siblings the turn did. With every advantage 1 it is
exactly TRL's SFT loss. A turn better than its siblings' mean is made more likely, a worse one less likely; on-policy
this is the policy gradient with a leave-one-out baseline (one step of GRPO without clipping). ``tree.negative_weight``
scales the negative side (0 keeps only the turns above their siblings). Rows whose weight is 0 are skipped and
counted before the model loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, with_trl
from josh.training.data import DatasetError, to_dataset
from josh.training.model import lora_config
from josh.training.recipe import TrainRecipe


def weighted_rows(recipe: TrainRecipe, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Rows with ``advantage`` turned into the loss weight (negatives scaled); rows of weight 0 dropped and counted."""
    out = []
    for row in rows:
        weight = row["advantage"] if row["advantage"] > 0 else row["advantage"] * recipe.tree.negative_weight
        if weight != 0:
            out.append({**row, "advantage": weight})
    if not out:
        raise DatasetError(
            f"{recipe.data}: every row has advantage 0 (or only negative ones with tree.negative_weight=0): nothing "
            "to learn from"
        )
    return out, len(rows) - len(out)


def advantage_trainer_class() -> type:
    """``SFTTrainer`` with the advantage-weighted loss (built lazily: trl is imported only when training)."""
    import torch  # optional: the train extra
    from trl import SFTTrainer  # optional: the train extra

    class AdvantageWeightedTrainer(SFTTrainer):
        """TRL's SFT pipeline (templates, masks, fused head, accumulation); the loss weights each row."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            collate = self.data_collator

            def with_advantage(examples: list[dict[str, Any]]) -> dict[str, Any]:
                batch = collate(examples)
                batch["advantage"] = torch.tensor([e["advantage"] for e in examples], dtype=torch.float32)
                return batch

            self.data_collator = with_advantage

        def _set_signature_columns_if_needed(self) -> None:
            super()._set_signature_columns_if_needed()
            if "advantage" not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, "advantage"]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weights = inputs.pop("advantage")
            outputs = model(**inputs, use_cache=False, fused_lm_head=True)
            log_probs = outputs.log_probs
            per_token = -log_probs * weights.to(log_probs.device, log_probs.dtype)[:, None]
            tokens = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = per_token.sum() / torch.as_tensor(tokens).clamp(min=1)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes
            mode = "train" if self.model.training else "eval"
            labelled = outputs.label_mask.sum().clamp(min=1)
            self._metrics[mode]["nll"].append((-log_probs.detach().sum() / labelled).item())
            self._metrics[mode]["advantage"].append(weights.mean().item())
            return (loss, outputs) if return_outputs else loss

    return AdvantageWeightedTrainer


def arguments(recipe: TrainRecipe, output_dir: Path) -> dict[str, Any]:
    """The ``SFTConfig`` keyword arguments josh sets for the tree loss."""
    return {**base_arguments(recipe, output_dir), "assistant_only_loss": True, "completion_only_loss": True}


def config(recipe: TrainRecipe, output_dir: Path) -> Any:
    """TRL's ``SFTConfig`` of the tree arm, its ``tree.trl`` arguments included."""
    from trl import SFTConfig  # optional: the train extra

    return SFTConfig(**with_trl(recipe, arguments(recipe, output_dir)))


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    return advantage_trainer_class()(
        model=model,
        args=config(recipe, output_dir),
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=None if recipe.model.adapter else lora_config(recipe.lora),
        callbacks=callbacks,
    )
