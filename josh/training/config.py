"""Recipe → TRL/transformers training arguments shared by SFT, KTO and DPO."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from josh.training.data import to_dataset
from josh.training.launch import uses_configured_state
from josh.training.model import lora_config
from josh.training.recipe import RecipeError, TrainRecipe, recipe_error
from josh.training.trl_args import trl_problems


def check_report_to(report_to: list[str]) -> None:
    """Fail early when a logger is requested but not installed (wandb is optional, never required)."""
    for name in report_to:
        if (
            name in ("wandb", "tensorboard")
            and importlib.util.find_spec("wandb" if name == "wandb" else "tensorboard") is None
        ):
            extra = "pip install 'josh-agents[wandb]'" if name == "wandb" else "pip install tensorboard"
            raise RecipeError(f"report_to lists {name!r} but it is not installed: {extra}, or drop it")


def check_trainer_packages(recipes: Iterable[TrainRecipe]) -> list[str]:
    """The packages training on ``recipes`` imports (TRL, PEFT, accelerate; bitsandbytes for a 4-bit one), checked
    installed; ``RecipeError`` naming the install when one is missing."""
    needed = ["trl", "peft", "accelerate"]
    if any(recipe.quantization.load_in_4bit for recipe in recipes):
        needed.append("bitsandbytes")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise RecipeError(f"training needs {', '.join(missing)}, not installed: pip install 'josh-agents[train]'")
    return needed


def check_liger_kernel(enabled: bool) -> None:
    """``optim.use_liger_kernel`` needs Liger's Triton kernels and a CUDA GPU to run them; say which is missing."""
    if not enabled:
        return
    import torch  # optional: the train extra

    if not torch.cuda.is_available():
        raise RecipeError(
            "optim.use_liger_kernel needs a CUDA GPU: Liger's kernels are Triton-only and this machine has none "
            "(set optim.use_liger_kernel=false; the CPU path already computes the loss without full logits)"
        )
    if importlib.util.find_spec("liger_kernel") is None or importlib.util.find_spec("triton") is None:
        raise RecipeError("optim.use_liger_kernel needs liger-kernel and triton: pip install 'josh-agents[liger]'")


def optimizer_steps(recipe: TrainRecipe, rows: int, processes: int = 1) -> int:
    """The optimizer steps ``rows`` make under the recipe's epochs, batch size and accumulation (as the trainer counts)."""
    opt = recipe.optim
    batches = math.ceil(rows / (opt.per_device_train_batch_size * processes))
    return math.ceil(opt.num_train_epochs * max(batches // opt.gradient_accumulation_steps, 1))


def with_min_steps(recipe: TrainRecipe, rows: int, processes: int = 1) -> TrainRecipe:
    """The recipe, with ``optim.max_steps`` raised to ``optim.min_steps`` when its epochs give fewer steps."""
    wanted = recipe.optim.min_steps
    steps = optimizer_steps(recipe, rows, processes)
    if not wanted or steps >= wanted:
        return recipe
    print(f"optim.min_steps={wanted}: {rows} row(s) x {recipe.optim.num_train_epochs:g} epoch(s) make {steps} step(s); "
          f"training {wanted}")  # fmt: skip
    optim = recipe.optim.model_copy(update={"max_steps": wanted, "min_steps": 0})
    return recipe.model_copy(update={"optim": optim})


def base_arguments(recipe: TrainRecipe, output_dir: Path) -> dict[str, Any]:
    """Keyword arguments every TRL config (``SFTConfig``, ``KTOConfig``, ``DPOConfig``) accepts: the ``optim``
    section's under their own names, and the ones josh fixes (``josh.training.trl_args`` says why)."""
    optim = recipe.optim.model_dump(exclude={"min_steps"})
    warmup = optim["warmup_steps"]
    return {
        "output_dir": str(output_dir),
        "run_name": recipe.resolved_run_name,
        "seed": recipe.seed,
        **optim,
        "warmup_steps": int(warmup) if warmup >= 1 else warmup,
        "logging_first_step": True,
        "save_strategy": "steps",
        "report_to": recipe.report_to or "none",
        "include_num_input_tokens_seen": "non_padding",
        "max_length": recipe.max_length,
        "dataset_num_proc": None,
        "disable_tqdm": False,
        "ddp_find_unused_parameters": False,  # every LoRA weight gets a gradient; the check costs a graph walk
        # FSDP / DeepSpeed on CPU processes: keep the state josh.training.launch set up instead of starting anew
        **({"accelerator_config": {"use_configured_state": True}} if uses_configured_state() else {}),
    }


def with_trl(recipe: TrainRecipe, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` (josh's, for the method's TRL config) and the method section's ``trl:`` mapping, checked as at
    the recipe's load (a recipe built in Python may not have been)."""
    if problems := trl_problems(recipe):
        raise recipe_error(problems)
    return {**arguments, **getattr(recipe, recipe.method).trl}


def trl_trainer(
    trainer: Any, recipe: TrainRecipe, args: Any, rows: list[dict[str, Any]], model: Any, tokenizer: Any,
    callbacks: list, *, peft: bool = True,
) -> Any:  # fmt: skip
    """A TRL ``trainer`` class built on ``rows`` with the recipe's fresh LoRA adapter (``peft=False``: the model
    already carries the adapter it trains)."""
    return trainer(
        model=model,
        args=args,
        train_dataset=to_dataset(rows),
        processing_class=tokenizer,
        peft_config=lora_config(recipe.lora) if peft else None,
        callbacks=callbacks,
    )
