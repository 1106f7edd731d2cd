"""Shared loading for every trainer: tokenizer with a training chat template, base model (optionally 4-bit NF4),
and the PEFT LoRA config."""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from josh.llm.models import ModelNotFoundError, four_bit, is_adapter_dir, resolve_model
from josh.training.recipe import LoraSpec, QuantizationSpec, TrainRecipe


class TemplateError(ValueError):
    """The model's chat template cannot mark assistant tokens and no training template is known for it."""


def has_generation_markers(template: str | None) -> bool:
    return bool(template) and "{% generation %}" in template.replace("{%-", "{%").replace("-%}", "%}")


def bundled_template(name: str) -> str:
    """A training template shipped in ``josh/training/templates``."""
    return importlib.resources.files("josh.training").joinpath(f"templates/{name}").read_text()


def _is_llama3(template: str) -> bool:
    return "<|start_header_id|>" in template and "<|eot_id|>" in template


def training_template(tokenizer: Any, override: str | Path | None = None) -> str | None:
    """The chat template to train with, or None when the model has none that marks assistant tokens.

    Order: an explicit file; the model's own template when it already has generation markers; josh's Llama-3
    template (it also renders tools, which the stock Llama-3.0 template drops); TRL's patched template for the
    families it knows.
    """
    if override is not None:
        path = Path(override)
        if not path.is_file():
            raise TemplateError(f"model.chat_template file not found: {path}")
        return path.read_text()
    current = tokenizer.chat_template
    if isinstance(current, dict):
        current = current.get("default")
    if has_generation_markers(current):
        return current
    if current and _is_llama3(current):
        return bundled_template("llama3_tools.jinja")
    if current:
        from trl.chat_template_utils import get_training_chat_template  # optional: the train extra

        return get_training_chat_template(tokenizer)
    return None


def load_tokenizer(recipe: TrainRecipe, *, need_masks: bool) -> Any:
    """Tokenizer with a pad token and the training template installed (saved with the adapter, so inference
    renders exactly what training saw)."""
    from transformers import AutoTokenizer  # optional: the train extra

    path = model_path(recipe.model.name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot load the tokenizer of {recipe.model.name!r}: {exc}") from None
    template = training_template(tokenizer, recipe.model.chat_template)
    if template is None and need_masks:
        raise TemplateError(
            f"the chat template of {recipe.model.name!r} has no {{% generation %}} markers and josh knows no training "
            "template for it: give one with model.chat_template=PATH, or set sft.assistant_only_loss=false"
        )
    if template is not None:
        tokenizer.chat_template = template
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def model_path(name: str) -> str:
    """Resolve a model name (alias, local folder or hub id); a path that does not exist is an error here."""
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().is_dir():
        raise ModelNotFoundError(f"model folder not found: {name}")
    return resolve_model(name)


def torch_dtype(name: str) -> Any:
    import torch  # optional: the train extra

    return "auto" if name == "auto" else getattr(torch, name)


def quantization_config(spec: QuantizationSpec) -> Any:
    """bitsandbytes 4-bit config (NF4 + double quant + bf16 compute by default), or None."""
    if not spec.load_in_4bit:
        return None
    return four_bit(torch_dtype(spec.compute_dtype), quant_type=spec.quant_type, double_quant=spec.double_quant)


def load_model(recipe: TrainRecipe) -> Any:
    """The base causal LM, in 4-bit when asked (bitsandbytes 4-bit also runs on CPU, slowly)."""
    import torch  # optional: the train extra
    from transformers import AutoModelForCausalLM  # optional: the train extra

    kwargs: dict[str, Any] = {"dtype": torch_dtype(recipe.model.dtype)}
    if recipe.model.attn_implementation:
        kwargs["attn_implementation"] = recipe.model.attn_implementation
    quant = quantization_config(recipe.quantization)
    if quant is not None:
        kwargs["quantization_config"] = quant
        if not torch.cuda.is_available():
            kwargs["device_map"] = "cpu"
    try:
        model = AutoModelForCausalLM.from_pretrained(model_path(recipe.model.name), **kwargs)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot load model {recipe.model.name!r}: {exc}") from None
    if quant is not None:
        from peft import prepare_model_for_kbit_training  # optional: the train extra

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=recipe.optim.gradient_checkpointing)
    if recipe.model.adapter:
        model = with_trainable_adapter(model, recipe.model.adapter)
    return model


def with_trainable_adapter(model: Any, folder: str) -> Any:
    """``model`` with a trained LoRA adapter attached and trainable, so fine-tuning continues from it."""
    from peft import PeftModel  # optional: the train extra

    if not is_adapter_dir(folder):
        raise ModelNotFoundError(f"model.adapter {folder!r} is not a PEFT adapter folder (no adapter_config.json)")
    try:
        return PeftModel.from_pretrained(model, folder, is_trainable=True)
    except (RuntimeError, ValueError, KeyError) as exc:
        raise ModelNotFoundError(f"adapter {folder} does not fit the base model: {exc}") from None


def lora_config(spec: LoraSpec) -> Any:
    """PEFT ``LoraConfig`` for a causal LM, or None when LoRA is off."""
    if not spec.enabled:
        return None
    from peft import LoraConfig  # optional: the train extra

    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=spec.target_modules,
        bias=spec.bias,
        task_type="CAUSAL_LM",
    )
