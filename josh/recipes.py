"""Recipe YAML models: what to train, on which data, with which hyperparameters.

A recipe is strict (``extra="forbid"``): an unknown key fails before any work starts, with the closest valid key
named. ``--set a.b=value`` overrides are parsed as YAML scalars and coerced by pydantic like the file itself.
``TrainRecipe`` is self-contained; ``LoopRecipe`` (``josh loop``) embeds one per training arm.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from josh.advantages import AdvantageConfig
from josh.extract import ExtractConfig
from josh.grpo_spec import GRPOSpec
from josh.llm.base import Sampling
from josh.runspec import RunSpec
from josh.search import SearchConfig
from josh.warmstart import WarmStartConfig

Method = Literal["sft", "kto", "dpo", "tree", "grpo"]


class RecipeError(ValueError):
    """A recipe file or override is invalid; the message says where and how to fix it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSpec(_Strict):
    """The base model to fine-tune."""

    name: str = "smollm2"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    attn_implementation: str | None = None
    chat_template: str | None = Field(None, description="path to a Jinja training template that replaces the model's")
    adapter: str | None = Field(
        None,
        description="SFT, tree and GRPO: continue training this LoRA adapter folder instead of starting a fresh adapter",
    )


class LoraSpec(_Strict):
    """PEFT LoRA adapter settings (``enabled: false`` trains every weight)."""

    enabled: bool = True
    r: int = Field(16, gt=0)
    alpha: int = Field(32, gt=0)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: Literal["all-linear"] | list[str] = "all-linear"
    bias: Literal["none", "all", "lora_only"] = "none"


class QuantizationSpec(_Strict):
    """bitsandbytes 4-bit loading (QLoRA): NF4 weights, optional double quantisation, compute dtype."""

    load_in_4bit: bool = False
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: bool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class OptimSpec(_Strict):
    """Optimisation and bookkeeping shared by every method (maps onto transformers ``TrainingArguments``)."""

    epochs: float = Field(1.0, gt=0)
    max_steps: int = -1
    learning_rate: float = Field(2e-5, gt=0)
    per_device_batch_size: int = Field(1, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    warmup: float = Field(0, ge=0, description="warmup steps when >= 1, else a fraction of all steps")
    lr_scheduler: str = "linear"
    weight_decay: float = Field(0.0, ge=0.0)
    max_grad_norm: float = Field(1.0, gt=0)
    optim: str = "adamw_torch"
    bf16: bool = False
    gradient_checkpointing: bool = Field(
        True, description="recompute activations in the backward pass (TRL's default): less memory, slower steps"
    )
    liger_kernel: bool = Field(
        False, description="Liger's Triton kernels (RMSNorm, RoPE, SwiGLU); needs a CUDA GPU and liger-kernel"
    )
    logging_steps: int = Field(1, gt=0)
    save_steps: int = Field(100, gt=0)
    save_total_limit: int | None = 2


class SFTSpec(_Strict):
    """Supervised fine-tuning on whole conversations, loss on assistant tokens only."""

    assistant_only_loss: bool = True
    packing: bool = False


class KTOSpec(_Strict):
    """KTO on single good/bad agent turns. Weights left empty are balanced from the label counts."""

    beta: float = Field(0.1, gt=0)
    desirable_weight: float | None = Field(None, gt=0)
    undesirable_weight: float | None = Field(None, gt=0)


class DPOSpec(_Strict):
    """DPO on chosen/rejected agent turns that share a prompt."""

    beta: float = Field(0.1, gt=0)
    loss_type: str = "sigmoid"


class TreeSpec(_Strict):
    """Advantage-weighted log-likelihood on sibling turns with tree advantages (``josh extract --format tree``)."""

    negative_weight: float = Field(
        1.0, ge=0.0, description="scale of negative advantages (0: train only on turns above their siblings' mean)"
    )


class TrainRecipe(_Strict):
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


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The valid keys of the nested model that ``loc`` (minus its last item) points into."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


def _closest(name: str, valid: list[str]) -> list[str]:
    """The most similar valid key (spelling first, then a shared prefix such as rank → r)."""
    close = difflib.get_close_matches(name, valid, n=1)
    return close or [k for k in sorted(valid, key=len, reverse=True) if name.startswith(k) or k.startswith(name)][:1]


def _explain(error: ValidationError, model: type[BaseModel], source: str) -> RecipeError:
    lines = []
    for item in error.errors():
        key = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            valid = _fields_at(model, item["loc"])
            close = _closest(str(item["loc"][-1]), valid)
            hint = f"did you mean {'.'.join([*map(str, item['loc'][:-1]), close[0]])!r}?" if close else ""
            lines.append(f"unknown key {key!r} {hint}".rstrip() + f" (valid here: {', '.join(valid)})")
        else:
            lines.append(f"{key or '(recipe)'}: {item['msg']}")
    where = f"invalid recipe {source}" if source else "invalid recipe"
    return RecipeError(f"{where}:\n  " + "\n  ".join(lines))


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


def build_recipe(data: dict[str, Any], overrides: list[str] | None = None, source: str = "") -> TrainRecipe:
    """Validate a recipe dict plus overrides into a ``TrainRecipe`` (or raise one readable ``RecipeError``)."""
    merged = apply_overrides(data, overrides or [])
    try:
        return TrainRecipe.model_validate(merged)
    except ValidationError as exc:
        raise _explain(exc, TrainRecipe, source) from None


def _read_mapping(path: Path) -> dict[str, Any]:
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
    return build_recipe(_read_mapping(path), overrides, source=str(path))


class EvalSpec(_Strict):
    """How every model of the loop is evaluated: the same held-out tasks each time."""

    split: str = "test"
    limit: int | None = Field(None, ge=1)
    trials: int = Field(1, ge=1)
    max_turns: int = Field(15, ge=1)
    concurrency: int = Field(16, ge=1)
    sampling: Sampling | None = Field(None, description="agent sampling at evaluation (default: the agent's)")


class RolloutSpec(_Strict):
    """JOSH rollouts of one round: which train tasks, the search, the sampling."""

    split: str = "train"
    skip: int = Field(0, ge=0, description="tasks skipped at the start of the split (e.g. the warm start's)")
    tasks: int | None = Field(None, ge=1, description="tasks per round (default: the rest of the split)")
    new_tasks_each_round: bool = Field(True, description="round r takes the r-th block of `tasks` tasks")
    concurrency: int = Field(16, ge=1)
    search: SearchConfig = Field(default_factory=SearchConfig)
    sampling: Sampling | None = Field(None, description="agent sampling during the search (default: the agent's)")


class ControlsSpec(_Strict):
    """Control arms trained and evaluated beside JOSH on the same held-out tasks."""

    random: bool = Field(
        False,
        description="control-random: from each round's trees, one random root-to-leaf branch per tree instead of the "
        "ideal path (no reward selection), trained exactly like the SFT arm; with accumulate, on the warm-start rows "
        "and every round's random branches so far",
    )
    retrain: bool = Field(
        False,
        description="control-retrain: the start policy retrained on its own warm-start rows with another seed and "
        "row order (the noise floor)",
    )
    random_rows: Literal["all", "match"] = Field(
        "all",
        description="control-random's rows: one per tree (all), or a random subset as large as the round's JOSH-SFT "
        "rows (match), so that the control differs from JOSH in the selection only, not in the amount of data",
    )
    rounds: list[int] | None = Field(
        None,
        description="rounds that train and evaluate control-random (default: every round); with accumulate, the "
        "rounds before them still draw their random branches",
    )


ARMS = ("sft", "kto", "tree", "grpo")


class LoopRecipe(_Strict):
    """``josh loop``: baseline eval, optional scripted warm start, then rounds of rollouts, extraction, training
    (SFT and/or KTO arms) and evaluation. Stages live under ``<output_dir>/<name>/`` (``seed-K/`` per seed when
    ``seeds`` > 1)."""

    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    output_dir: Path = Path("runs")
    rounds: int = Field(1, ge=1)
    seed: int | None = Field(
        None,
        description="seeds the rollout sampling and shifts every training seed by this much; unset: unseeded "
        "sampling and the arms' own seeds",
    )
    seeds: int = Field(1, ge=1, description="independent runs with seeds seed, seed+1, ... (from 0 when seed is unset)")
    train_seeds: int = Field(
        1,
        ge=1,
        description="train and evaluate each SFT-recipe model (warm start, JOSH-SFT, control-random) at this many "
        "training seeds over the same rows (reshuffled); the report pools their rewards per task",
    )
    setup: RunSpec = Field(
        default_factory=RunSpec,
        description="the run spec, as `josh eval` / `josh rollout` take it; model: the base policy",
    )
    baseline: bool = Field(True, description="evaluate the base model before any training")
    warm_start: WarmStartConfig | None = None
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    sft: TrainRecipe | None = None
    kto: TrainRecipe | None = None
    tree: TrainRecipe | None = Field(
        None, description="the tree arm: tree advantages of each round's search, continuing the policy that searched"
    )
    grpo: TrainRecipe | None = Field(
        None, description="the GRPO arm: online GRPO on each round's rollout tasks, from the start policy onwards"
    )
    grpo_budget: Literal["recipe", "search"] = Field(
        "recipe",
        description="recipe: the GRPO arm trains as its recipe says (epochs, max_steps, grpo.max_llm_calls); search: "
        "each round's GRPO stops once its rollouts used as many LLM calls as that round's search (raise its "
        "optim.epochs if one pass over the tasks costs less)",
    )
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig, description="tree arm: subtree reward")
    policy: Literal["sft", "kto", "tree", "grpo"] | None = Field(
        None, description="arm whose checkpoint runs the next round"
    )
    kto_from: Literal["base", "sft"] = Field(
        "base",
        description="base: the KTO arm trains a fresh adapter on the base model (JOSH-KTO); sft: on the round's SFT "
        "policy merged into a full model, which is also KTO's reference (JOSH-SFT+KTO)",
    )
    controls: ControlsSpec = Field(default_factory=ControlsSpec)
    accumulate: bool = Field(
        True,
        description="every arm trains on all rows so far: SFT on the warm start plus every round's ideal paths, KTO "
        "on every round's good/bad turns",
    )
    sft_from: Literal["base", "policy"] = Field(
        "base",
        description="base: each SFT adapter is trained fresh from the base model; policy: it continues the adapter "
        "that ran the round's rollouts, on that round's rows only (needs accumulate: false)",
    )
    eval: EvalSpec = Field(default_factory=EvalSpec)

    @model_validator(mode="after")
    def _check_arms(self) -> LoopRecipe:
        if all(getattr(self, arm) is None for arm in ARMS):
            raise ValueError("give at least one training arm: sft, kto, tree or grpo")
        if self.warm_start is not None and self.warm_start.enabled and self.sft is None:
            raise ValueError("warm_start trains with the sft recipe: add an sft arm")
        for method in ARMS:
            arm = getattr(self, method)
            if arm is not None and arm.model.name != self.setup.model:
                raise ValueError(
                    f"{method}.model.name ({arm.model.name}) must be the loop's base model setup.model "
                    f"({self.setup.model})"
                )
        if self.sft_from == "policy" and self.accumulate:
            raise ValueError(
                "sft_from: policy continues the previous adapter on each round's new rows; set accumulate: false "
                "(accumulate: true retrains from the base model on every row so far)"
            )
        if self.policy is not None and getattr(self, self.policy) is None:
            raise ValueError(f"policy {self.policy!r} names an arm the recipe does not train")
        if self.kto_from == "sft" and (self.sft is None or self.kto is None):
            raise ValueError("kto_from: sft trains KTO on the SFT arm's policy: give both an sft and a kto arm")
        if self.sft_from == "policy" and self.policy_arm == "kto":
            raise ValueError(
                "sft_from: policy continues the policy's adapter with SFT on the base model, but policy kto's adapter "
                "belongs to another base; use policy: sft or sft_from: base"
            )
        if self.kto_from == "sft" and self.policy == "kto" and (self.tree is not None or self.grpo is not None):
            raise ValueError(
                "the tree and GRPO arms continue adapters of the base model, but policy kto with kto_from: sft is an "
                "adapter of the merged SFT policy; use policy sft or kto_from: base"
            )
        if self.grpo_budget == "search" and self.grpo is None:
            raise ValueError("grpo_budget: search sets the GRPO arm's LLM-call budget: add a grpo arm")
        if self.controls.random and self.sft is None:
            raise ValueError("controls.random trains exactly like the SFT arm: add an sft arm")
        return self

    @property
    def policy_arm(self) -> str:
        return self.policy or next(arm for arm in ARMS if getattr(self, arm) is not None)

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.name

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def load_loop_recipe(path: str | Path, overrides: list[str] | None = None) -> LoopRecipe:
    """Read a loop recipe YAML file and apply ``--set`` overrides (e.g. ``--set rounds=2``)."""
    data = _read_mapping(Path(path))
    merged = apply_overrides(data, overrides or [])
    try:
        return LoopRecipe.model_validate(merged)
    except ValidationError as exc:
        raise _explain(exc, LoopRecipe, str(path)) from None
