"""KTO with TRL's ``KTOTrainer`` on single good/bad agent turns.

With LoRA the reference model is the policy with its adapter disabled (no second copy in memory). The KL term is
estimated from mismatched prompt/completion pairs inside each device batch, so that batch must hold at least two
rows; the last short batch is dropped for the same reason.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from josh.training.config import base_arguments, trl_trainer, with_trl
from josh.training.data import check_kto_labels
from josh.training.recipe import KTOSpec, RecipeError, TrainRecipe


def balanced_weights(spec: KTOSpec, desirable: int, undesirable: int) -> tuple[float, float]:
    """(desirable_weight, undesirable_weight): given values win; missing ones make the two sides weigh the same
    in total (KTO paper eq. 8 asks for λ_D·n_D / λ_U·n_U in [1, 4/3])."""
    dw, uw = spec.desirable_weight, spec.undesirable_weight
    if dw is not None and uw is not None:
        return dw, uw
    if dw is not None:
        return dw, dw * desirable / undesirable
    if uw is not None:
        return uw * undesirable / desirable, uw
    if desirable >= undesirable:
        return 1.0, desirable / undesirable
    return undesirable / desirable, 1.0


def validate(recipe: TrainRecipe, rows: list[dict[str, Any]]) -> None:
    """Batch-size sanity for the KL estimate, checked before any model is loaded."""
    size = recipe.optim.per_device_train_batch_size
    if size < 2:
        raise RecipeError(
            "KTO needs optim.per_device_train_batch_size >= 2: the KL reference term pairs each prompt with another "
            "row's completion in the same batch (raise the batch size and lower gradient_accumulation_steps to keep "
            "the effective batch)"
        )
    if len(rows) < size:
        raise RecipeError(f"KTO has {len(rows)} rows, fewer than one batch of {size}: add data or lower the batch size")


def arguments(recipe: TrainRecipe, output_dir: Path, labels: tuple[int, int]) -> dict[str, Any]:
    """The ``KTOConfig`` keyword arguments josh sets, the weights balanced for ``labels`` (desirable, undesirable)."""
    dw, uw = balanced_weights(recipe.kto, *labels)
    return {
        **base_arguments(recipe, output_dir),
        "beta": recipe.kto.beta,
        "desirable_weight": dw,
        "undesirable_weight": uw,
        "dataloader_drop_last": True,
    }


def config(recipe: TrainRecipe, output_dir: Path, labels: tuple[int, int]) -> Any:
    """TRL's ``KTOConfig`` of the recipe for rows with ``labels`` (desirable, undesirable), ``kto.trl`` included."""
    from trl import KTOConfig  # optional: the train extra

    return KTOConfig(**with_trl(recipe, arguments(recipe, output_dir, labels)))


def build_trainer(
    recipe: TrainRecipe, rows: list[dict[str, Any]], model: Any, tokenizer: Any, output_dir: Path, callbacks: list
) -> Any:
    from trl import KTOTrainer  # optional: the train extra

    rows = list(rows)
    random.Random(recipe.seed).shuffle(rows)  # the KTO sampler is sequential: mix the labels once, reproducibly
    args = config(recipe, output_dir, check_kto_labels(rows))
    return trl_trainer(KTOTrainer, recipe, args, rows, model, tokenizer, callbacks)
