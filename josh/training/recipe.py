"""Recipe YAML models: what to train, on which data, with which hyperparameters.

A recipe is strict (``extra="forbid"``): an unknown key fails before any work starts, with the closest valid key
named. ``--set a.b=value`` overrides are parsed as YAML scalars and coerced by pydantic like the file itself.
``TrainRecipe`` is self-contained; ``LoopRecipe`` (``josh loop``, in ``josh.loop.recipe``) embeds one per
training arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from josh.run.spec_check import spec_problems
from josh.training.grpo.spec import GRPOSpec
from josh.training.trl_args import TRLArguments, trl_problems
from josh.util.bundled import recipe_file
from josh.util.strict import ConfigError, StrictModel, explain

Method = Literal["sft", "kto", "dpo", "tree", "grpo"]


class RecipeError(ConfigError):
    """A recipe file or override is invalid, or cannot be trained on; the message says where and how to fix it."""


class ModelSpec(StrictModel):
    """The base model to fine-tune."""

    name: str = "smollm2"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    attn_implementation: str | None = None
    chat_template: str | None = Field(None, description="path to a Jinja training template that replaces the model's")
    adapter: str | None = Field(
        None,
        description="SFT, tree and GRPO: continue training this LoRA adapter folder instead of starting a fresh adapter",
    )


class LoraSpec(StrictModel):
    """PEFT LoRA adapter settings (``enabled: false`` trains every weight)."""

    enabled: bool = True
    r: int = Field(16, gt=0)
    alpha: int = Field(32, gt=0)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: Literal["all-linear"] | list[str] = "all-linear"
    bias: Literal["none", "all", "lora_only"] = "none"


class QuantizationSpec(StrictModel):
    """bitsandbytes 4-bit loading (QLoRA): NF4 weights, optional double quantisation, compute dtype."""

    load_in_4bit: bool = False
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: bool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class OptimSpec(StrictModel):
    """Optimisation and bookkeeping shared by every method: ``TrainingArguments`` fields under their own names (but
    ``min_steps``, josh's)."""

    suggestions = {
        "epochs": "num_train_epochs",
        "per_device_batch_size": "per_device_train_batch_size",
        "batch_size": "per_device_train_batch_size",
        "warmup": "warmup_steps",
        "warmup_ratio": "warmup_steps",
        "lr_scheduler": "lr_scheduler_type",
        "liger_kernel": "use_liger_kernel",
    }

    num_train_epochs: float = Field(1.0, gt=0)
    max_steps: int = -1
    min_steps: int = Field(
        0,
        ge=0,
        description="train at least this many optimizer steps, passing over the rows again when the epochs "
        "give fewer (0: off); keeps a round with few rows from being undertrained",
    )
    learning_rate: float = Field(2e-5, gt=0)
    per_device_train_batch_size: int = Field(1, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    warmup_steps: float = Field(0, ge=0, description="warmup steps when >= 1, else a fraction of all steps")
    lr_scheduler_type: str = "linear"
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0)
    optim: str = "adamw_torch"
    bf16: bool = False
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass (TRL's default): less memory, slower steps"
    )
    use_liger_kernel: bool = Field(
        False, description="Liger's Triton kernels (RMSNorm, RoPE, SwiGLU); needs a CUDA GPU and liger-kernel"
    )
    logging_steps: int = Field(1, gt=0)
    save_steps: int = Field(100, gt=0)
    save_total_limit: int | None = 2


class SFTSpec(TRLArguments):
    """Supervised fine-tuning on whole conversations, loss on assistant tokens only."""

    assistant_only_loss: bool = True
    packing: bool = False


class KTOSpec(TRLArguments):
    """KTO on single good/bad agent turns. Weights left empty are balanced from the label counts."""

    beta: float = Field(0.1, gt=0)
    desirable_weight: float | None = Field(None, gt=0)
    undesirable_weight: float | None = Field(None, gt=0)


class DPOSpec(TRLArguments):
    """DPO on chosen/rejected agent turns that share a prompt."""

    beta: float = Field(0.1, gt=0)
    loss_type: str = "sigmoid"


class TreeSpec(TRLArguments):
    """Advantage-weighted log-likelihood on sibling turns with tree advantages (``josh extract --format tree``)."""

    negative_weight: float = Field(
        1.0, ge=0.0, description="scale of negative advantages (0: train only on turns above their siblings' mean)"
    )


class TrainRecipe(StrictModel):
    """One fine-tuning run: model, adapter, quantisation, method hyperparameters, data and output."""

    method: Method = "sft"
    run_name: str | None = None
    data: Path | None = None
    output_dir: Path = Path("checkpoints")
    max_length: int = Field(4096, gt=0)
    seed: int = 42
    report_to: list[str] = Field(default_factory=list, description="e.g. ['wandb'] or ['tensorboard']; [] logs none")
    model: ModelSpec = Field(default_factory=ModelSpec)
    lora: LoraSpec = Field(default_factory=LoraSpec)
    quantization: QuantizationSpec = Field(default_factory=QuantizationSpec)
    optim: OptimSpec = Field(default_factory=OptimSpec)
    sft: SFTSpec = Field(default_factory=SFTSpec)
    kto: KTOSpec = Field(default_factory=KTOSpec)
    dpo: DPOSpec = Field(default_factory=DPOSpec)
    tree: TreeSpec = Field(default_factory=TreeSpec)
    grpo: GRPOSpec = Field(default_factory=GRPOSpec)

    @model_validator(mode="after")
    def _check_method(self) -> TrainRecipe:
        if self.quantization.load_in_4bit and not self.lora.enabled:
            raise ValueError("quantization.load_in_4bit needs lora.enabled: 4-bit weights cannot be trained directly")
        if self.model.adapter and (self.method not in ("sft", "tree", "grpo") or not self.lora.enabled):
            raise ValueError(
                "model.adapter (continue a LoRA adapter) needs method sft, tree or grpo with lora.enabled; KTO and DPO "
                "take their reference from the adapter-free base, so they start from a fresh adapter"
            )
        if self.optim.min_steps and (self.optim.max_steps > 0 or self.method == "grpo"):
            raise ValueError(
                "optim.min_steps counts passes over a data file: it cannot be combined with optim.max_steps, and GRPO "
                "(which samples its own rollouts) takes optim.max_steps instead"
            )
        return self

    @property
    def resolved_run_name(self) -> str:
        if self.run_name:
            return self.run_name
        return f"{Path(self.model.name).name.lower()}-{self.method}"

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.resolved_run_name

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def recipe_error(lines: list[str], source: str = "") -> RecipeError:
    """One error for every problem found in a recipe (``source``: its file), a line each."""
    where = f"invalid recipe {source}" if source else "invalid recipe"
    return RecipeError(f"{where}:\n  " + "\n  ".join(lines))


def explain_error(error: ValidationError, model: type[BaseModel], source: str) -> RecipeError:
    """``error``, raised validating ``model`` from ``source``, as one ``RecipeError`` (see ``josh.util.strict``)."""
    return recipe_error(explain(error, model), source)


def parse_override(text: str, flag: str = "--set", example: str = "optim.learning_rate=1e-4") -> tuple[list[str], Any]:
    """``'optim.learning_rate=1e-4'`` → (['optim', 'learning_rate'], 0.0001); the value is read as YAML. ``flag``
    and ``example`` word the error for the option being parsed."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"bad {flag} {text!r}: expected key=value, e.g. {example}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise RecipeError(f"bad {flag} {text!r}: the value is not valid YAML ({exc})") from exc
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted keys in a nested dict (a copy); validation happens when the recipe is built."""
    out = yaml.safe_load(yaml.safe_dump(data)) or {}
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise RecipeError(f"bad --set {text!r}: {part!r} is a value, not a section")
            node = child
        node[path[-1]] = value
    return out


def train_problems(recipe: TrainRecipe, where: tuple[str, ...] = ()) -> list[str]:
    """The problems of the component names and options in the ``grpo:`` section (``josh.run.spec_check``), when the
    recipe trains GRPO or gives that section, and of the TRL arguments its ``trl:`` mappings pass through."""
    given = recipe.method == "grpo" or "grpo" in recipe.model_fields_set
    return (spec_problems(recipe.grpo, (*where, "grpo")) if given else []) + trl_problems(recipe, where)


def build_recipe(data: dict[str, Any], overrides: list[str] | None = None, source: str = "") -> TrainRecipe:
    """Validate a recipe dict plus overrides into a ``TrainRecipe`` (or raise one readable ``RecipeError``), the
    component options of its ``grpo:`` section and its TRL arguments included."""
    merged = apply_overrides(data, overrides or [])
    try:
        recipe = TrainRecipe.model_validate(merged)
    except ValidationError as exc:
        raise explain_error(exc, TrainRecipe, source) from None
    if problems := train_problems(recipe):
        raise recipe_error(problems, source)
    return recipe


def read_mapping(path: Path) -> dict[str, Any]:
    """A recipe file's mapping; ``recipes/NAME.yaml`` not found here is josh's own copy (``josh.util.bundled``)."""
    path = recipe_file(path)
    if not path.is_file():
        raise RecipeError(f"recipe file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"recipe {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path} must be a mapping of keys to values")
    return data


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> TrainRecipe:
    """Read a recipe YAML file and apply ``--set`` overrides."""
    path = Path(path)
    return build_recipe(read_mapping(path), overrides, source=str(path))
