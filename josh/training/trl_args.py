"""TRL's own arguments in a recipe: the ``trl:`` mapping of each method section.

A recipe names what josh acts on itself with TRL's names (``optim.num_train_epochs``, ``kto.beta``, ``max_length``);
any other keyword argument of the method's TRL config class passes through that method's ``trl:`` mapping as is, e.g.
``sft: {trl: {dataloader_num_workers: 2}}`` into ``SFTConfig``, ``kto: {trl: {...}}`` into ``KTOConfig``. Before anything
runs, each key is checked against the installed TRL's config dataclass: an unknown one is refused with the closest
argument named, a value of the wrong type with TRL's type, and one josh sets with the recipe key that sets it (or why
josh fixes it).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import typing
from functools import cache
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from josh.util.strict import StrictModel, closest

CONFIG_CLASSES = {"sft": "SFTConfig", "tree": "SFTConfig", "kto": "KTOConfig", "dpo": "DPOConfig", "grpo": "GRPOConfig"}

# the TRL arguments josh sets beside its same-named recipe keys: the recipe key behind each, or why josh fixes it
SET_AS = {
    "grpo": {
        "max_completion_length": "from max_length, a whole conversation's tokens",
        "vllm_max_model_length": "from max_length and grpo.max_new_tokens",
        "use_vllm": "from grpo.generation",
        "vllm_mode": "colocate, from grpo.generation",
        "vllm_importance_sampling_correction": "off: josh's rollouts return no sampling logprobs",
        "mask_truncated_completions": "off: josh skips a conversation longer than max_length instead of cutting it",
        "log_completions": "off: the rollout ledger records every conversation",
    },
    "kto": {"dataloader_drop_last": "on: KTO's KL estimate pairs rows within a full batch"},
    "tree": {
        "assistant_only_loss": "on: the tree loss weights the completion's assistant tokens",
        "completion_only_loss": "on: the tree loss weights the completion's assistant tokens",
        "packing": "off: the tree loss weights each row by its advantage",
        "padding_free": "off: the tree loss weights each row by its advantage",
    },
}
SHARED = {
    "logging_first_step": "on: the first step's loss is logged",
    "save_strategy": "steps: a checkpoint every optim.save_steps",
    "include_num_input_tokens_seen": "josh's metrics count the tokens trained on",
    "dataset_num_proc": "josh tokenizes in the training process",
    "disable_tqdm": "josh's progress bar replaces TRL's",
    "ddp_find_unused_parameters": "off: every trained weight gets a gradient",
    "accelerator_config": "from the launch josh sets up",
}
INSTALL = "pip install 'josh-agents[train]'"


class TRLArguments(StrictModel):
    """A method section with a ``trl:`` mapping (see the module docstring)."""

    trl: dict[str, Any] = Field(
        default_factory=dict,
        description="any other keyword argument of the method's TRL config class (SFTConfig, KTOConfig, DPOConfig, "
        "GRPOConfig), passed as is; checked against the installed TRL",
    )


@cache
def trl_fields(class_name: str) -> dict[str, Any]:
    """The keyword arguments of TRL's config class ``class_name`` and their types, from the installed TRL."""
    config = getattr(importlib.import_module("trl"), class_name)
    hints = typing.get_type_hints(config)
    return {field.name: hints[field.name] for field in dataclasses.fields(config) if field.init}


def recipe_key(recipe: BaseModel, method: str, key: str) -> str | None:
    """The recipe key (TRL's name) from which josh sets TRL argument ``key`` of ``method``; None when there is none."""
    for prefix, fields in (("optim.", recipe.optim), (f"{method}.", getattr(recipe, method)), ("", recipe)):
        if key in type(fields).model_fields and key != "trl" and not isinstance(getattr(fields, key), BaseModel):
            return f"{prefix}{key}"
    return None


def fixed(method: str, key: str) -> str | None:
    """Why josh sets TRL argument ``key`` of ``method`` itself, when it does."""
    return SET_AS.get(method, {}).get(key) or SHARED.get(key)


def problem(recipe: BaseModel, method: str, key: str, value: Any, where: tuple[str, ...]) -> str | None:
    """Why ``key: value`` cannot pass through to ``method``'s TRL config; None when it can."""
    config = CONFIG_CLASSES[method]
    path = ".".join((*where, method, "trl", key))
    fields = trl_fields(config)
    if key not in fields:
        near = closest(key, list(fields))
        owned = recipe_key(recipe, method, near) if near else None
        suggestion = ".".join((*where, owned)) if owned else near
        hint = f": did you mean {suggestion!r}?" if suggestion else ""
        return f"unknown key {path!r}, not an argument of TRL's {config}{hint}"
    if (owned := recipe_key(recipe, method, key)) is not None:
        return f"{path}: josh sets {key} from {'.'.join((*where, owned))!r}: give it there"
    if (reason := fixed(method, key)) is not None:
        return f"{path}: josh sets {key} itself ({reason})"
    try:
        TypeAdapter(fields[key]).validate_python(value)
    except ValidationError as exc:
        kind = getattr(fields[key], "__name__", fields[key]) if isinstance(fields[key], type) else fields[key]
        return f"{path}: {exc.errors(include_url=False)[0]['msg']} (TRL's {config}.{key} takes {kind})"
    return None


def trl_problems(recipe: BaseModel, where: tuple[str, ...] = ()) -> list[str]:
    """Every problem of a ``TrainRecipe``'s ``trl:`` mappings (each method section's, checked against that method's TRL
    config class); ``where`` is the recipe's path in a loop recipe."""
    given = [(method, getattr(recipe, method).trl) for method in CONFIG_CLASSES if getattr(recipe, method).trl]
    if given and importlib.util.find_spec("trl") is None:
        paths = ", ".join(".".join((*where, method, "trl")) for method, _ in given)
        return [f"{paths}: TRL's arguments are checked against TRL, which is not installed: {INSTALL}"]
    found = (problem(recipe, method, key, value, where) for method, mapping in given for key, value in mapping.items())
    return [line for line in found if line is not None]
