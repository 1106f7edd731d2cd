"""The ``josh loop`` recipe: the run spec, the warm start, each round's rollouts, the training arms, the controls
and the evaluation, validated as one strict model (unknown keys fail with the closest valid key named)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from josh.core.llm import Sampling
from josh.harvest.advantages import AdvantageConfig
from josh.harvest.extract import ExtractConfig
from josh.harvest.warmstart import WarmStartConfig
from josh.run.spec import RunSpec
from josh.run.spec_check import judge_problems, spec_problems
from josh.search.algorithm import SearchConfig
from josh.training.launcher import LaunchSpec
from josh.training.recipe import TrainRecipe, apply_overrides, read_mapping, recipe_error, train_problems
from josh.util.strict import StrictModel, explain


class EvalSpec(StrictModel):
    """How every model of the loop is evaluated: the same held-out tasks each time."""

    split: str = "test"
    limit: int | None = Field(None, ge=1)
    trials: int = Field(1, ge=1)
    max_turns: int = Field(15, ge=1)
    concurrency: int = Field(16, ge=1)
    sampling: Sampling | None = Field(None, description="agent sampling at evaluation (default: the agent's)")


class RolloutSpec(StrictModel):
    """JOSH rollouts of one round: which train tasks, the search, the sampling."""

    split: str = "train"
    skip: int = Field(0, ge=0, description="tasks skipped at the start of the split (e.g. the warm start's)")
    tasks: int | None = Field(None, ge=1, description="tasks per round (default: the rest of the split)")
    exclude: Path | None = Field(
        None,
        description="a JSONL file of records with a task_id (e.g. import-paper's trees.jsonl) or a text file of task "
        "ids, one a line: those tasks are left out of the split before skip and tasks (the search then harvests "
        "conversations the warm start's rows do not already hold)",
    )
    new_tasks_each_round: bool = Field(True, description="round r takes the r-th block of `tasks` tasks")
    concurrency: int = Field(16, ge=1)
    search: SearchConfig = Field(default_factory=SearchConfig)
    sampling: Sampling | None = Field(None, description="agent sampling during the search (default: the agent's)")


class ControlsSpec(StrictModel):
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
    more: bool = Field(
        False,
        description="control-more: the start of each JOSH arm that continues the searching policy (sft_from: "
        "merged-policy, kto_from: policy) trained the same number of optimizer steps on the policy's own warm-start "
        "rows (warm_start.rows for SFT, warm_start.kto_rows for KTO) instead of the round's: what JOSH's rows add "
        "over more training of the same length",
    )
    gate: bool = Field(
        False,
        description="control-gate: with extract.judge on, the SFT arm trained again on the same trees' ideal paths "
        "without the judge gate, compared paired with JOSH-SFT (what the gate adds)",
    )


class WarmStartSpec(WarmStartConfig):
    """The loop's warm start: scripted demonstrations (``WarmStartConfig``), or (``rows``) the SFT rows of a file
    made elsewhere, e.g. the paper's own rollouts imported by ``josh data import-paper``; ``kto_rows`` then adds KTO
    on those rows' SFT model (the ``warm_kto`` recipe)."""

    rows: Path | None = Field(
        None,
        description="an SFT rows file (TRL conversational rows, e.g. import-paper's sft.jsonl) trained on instead of "
        "scripted demonstrations; tasks, skip, agent, user, max_turns and min_reward are then unused",
    )
    limit: int | None = Field(None, ge=1, description="rows: take `limit` of the file's rows (default: all)")
    kto_rows: Path | None = Field(
        None,
        description="a KTO rows file (e.g. import-paper's kto.jsonl): the warm-start SFT model, merged, is trained on "
        "it with the warm_kto recipe and evaluated as 'warm start+KTO' (the policy that searches stays the SFT one)",
    )
    kto_limit: int | None = Field(None, ge=1, description="kto_rows: take `kto_limit` of the file's rows")
    rows_seed: int | None = Field(
        None,
        description="limit and kto_limit draw their rows at random with this seed (in file order) instead of taking "
        "the first ones: import-paper writes every good KTO row before the bad ones",
    )
    searches: Literal["sft", "kto"] = Field(
        "sft",
        description="the warm-start model that searches round 1 and is the headline's start: the SFT model, or "
        "(kto) KTO on it (needs kto_rows and warm_kto)",
    )
    evaluate: bool = Field(
        True,
        description="evaluate the SFT warm start (each training draw too); false (with searches: kto) trains it "
        "only as the start of KTO, whose evaluation the report then compares with the base model alone",
    )

    @model_validator(mode="after")
    def _check_rows(self) -> WarmStartSpec:
        if self.limit is not None and self.rows is None:
            raise ValueError("warm_start.limit takes the first rows of warm_start.rows: give rows")
        if self.kto_limit is not None and self.kto_rows is None:
            raise ValueError("warm_start.kto_limit takes the first rows of warm_start.kto_rows: give kto_rows")
        if not self.evaluate and self.searches != "kto":
            raise ValueError(
                "warm_start.evaluate: false leaves out the SFT warm start's evaluation, but it searches round 1 and "
                "starts the headline; evaluate it, or search with KTO on it (warm_start.searches: kto)"
            )
        if self.searches == "kto" and self.kto_rows is None:
            raise ValueError("warm_start.searches: kto searches with KTO on the warm start: give kto_rows and warm_kto")
        return self


ARMS = ("sft", "kto", "tree", "grpo")


class LoopRecipe(StrictModel):
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
        description="train and evaluate each SFT-recipe model (warm start, JOSH-SFT, control-random) and each KTO "
        "model at this many training seeds over the same rows (reshuffled; KTO on SFT starts from the SFT model of "
        "the same training seed); the report pools their rewards per task",
    )
    setup: RunSpec = Field(
        default_factory=RunSpec,
        description="the run spec, as `josh eval` / `josh rollout` take it; model: the base policy",
    )
    baseline: bool = Field(True, description="evaluate the base model before any training")
    warm_start: WarmStartSpec | None = None
    warm_kto: TrainRecipe | None = Field(
        None,
        description="KTO on the warm start: the warm-start SFT model merged into a full model (also KTO's "
        "reference), trained on warm_start.kto_rows and evaluated beside it; the rounds' KTO arm is the kto section",
    )
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
        description="recipe: the GRPO arm trains as its recipe says (num_train_epochs, max_steps, grpo.max_llm_calls); search: "
        "each round's GRPO stops once its rollouts used as many LLM calls as that round's search (raise its "
        "optim.num_train_epochs if one pass over the tasks costs less)",
    )
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig, description="tree arm: subtree reward")
    arms: dict[str, TrainRecipe] = Field(
        default_factory=dict,
        description="training recipes of arms registered beside sft, kto, tree and grpo "
        "(josh.loop.arms.register_arm), by the arm's key",
    )
    policy: str | None = Field(
        None, description="arm whose checkpoint runs the next round: sft, kto, tree, grpo or a key of arms"
    )
    kto_from: Literal["base", "sft", "policy"] = Field(
        "base",
        description="base: the KTO arm trains a fresh adapter on the base model (JOSH-KTO); sft: on the round's SFT "
        "policy merged into a full model, which is also KTO's reference (JOSH-SFT+KTO); policy: on the policy that "
        "searched the round, merged (JOSH-KTO continuing that policy)",
    )
    controls: ControlsSpec = Field(default_factory=ControlsSpec)
    accumulate: bool = Field(
        True,
        description="every arm trains on all rows so far: SFT on the warm start plus every round's ideal paths, KTO "
        "on every round's good/bad turns",
    )
    sft_from: Literal["base", "policy", "merged-policy"] = Field(
        "base",
        description="base: each SFT adapter is trained fresh from the base model; policy: it continues the adapter "
        "that ran the round's rollouts, on that round's rows only (needs accumulate: false); merged-policy: a fresh "
        "adapter on the policy that searched the round, merged into a full model",
    )
    eval: EvalSpec = Field(default_factory=EvalSpec)
    launch: LaunchSpec | None = Field(
        None,
        description="train every training stage through accelerate launch with this config and number of processes "
        "(default: in the loop's own process)",
    )

    @model_validator(mode="after")
    def _check_arms(self) -> LoopRecipe:
        if shadowed := sorted(set(self.arms) & set(ARMS)):
            raise ValueError(f"arms: {', '.join(shadowed)} has its own section; give it there, not under arms")
        if not self.arm_keys:
            raise ValueError("give at least one training arm: sft, kto, tree or grpo")
        if self.warm_start is not None and self.warm_start.enabled and self.sft is None:
            raise ValueError("warm_start trains with the sft recipe: add an sft arm")
        warm = self.warm_start if self.warm_start is not None and self.warm_start.enabled else None
        if (self.warm_kto is not None) != (warm is not None and warm.kto_rows is not None):
            raise ValueError(
                "warm_kto trains on warm_start.kto_rows: give both or neither (with the warm start enabled)"
            )
        if self.warm_kto is not None and self.warm_kto.method != "kto":
            raise ValueError(f"warm_kto is a KTO recipe: its method is {self.warm_kto.method!r}, not 'kto'")
        named = [(m, self.arm_recipe(m)) for m in self.arm_keys] + [("warm_kto", self.warm_kto)]
        for method, arm in named:
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
        if self.policy is not None and self.arm_recipe(self.policy) is None:
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
        if self.controls.more and not self.continues_policy:
            raise ValueError(
                "controls.more trains the searching policy further on its own rows: set sft_from: merged-policy or "
                "kto_from: policy"
            )
        if self.controls.more and (warm is None or warm.rows is None):
            raise ValueError("controls.more trains on the warm start's own rows: give warm_start.rows")
        if self.controls.gate and (self.sft is None or self.extract.judge is None):
            raise ValueError(
                "controls.gate trains the SFT arm without the judge gate: add an sft arm and extract.judge"
            )
        return self

    @property
    def arm_keys(self) -> list[str]:
        """The keys of the arms this recipe trains: the built-in sections given, then ``arms``."""
        return [key for key in ARMS if getattr(self, key) is not None] + list(self.arms)

    def arm_recipe(self, key: str) -> TrainRecipe | None:
        """The training recipe of arm ``key`` (a built-in section or an entry of ``arms``); None when not trained."""
        return getattr(self, key) if key in ARMS else self.arms.get(key)

    @property
    def continues_policy(self) -> bool:
        """Whether an arm trains on the policy that searched the round, merged (what controls.more matches)."""
        return (self.sft is not None and self.sft_from == "merged-policy") or (
            self.kto is not None and self.kto_from == "policy"
        )

    @property
    def policy_arm(self) -> str:
        return self.policy or self.arm_keys[0]

    @property
    def warm_sft(self) -> TrainRecipe | None:
        """The sft recipe as the warm start and control-retrain train it: with ``warm_start.epochs`` when set."""
        if self.sft is None or self.warm_start is None or self.warm_start.epochs is None:
            return self.sft
        optim = self.sft.optim.model_copy(update={"num_train_epochs": self.warm_start.epochs})
        return self.sft.model_copy(update={"optim": optim})

    @property
    def run_dir(self) -> Path:
        return self.output_dir / self.name

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def component_problems(recipe: LoopRecipe) -> list[str]:
    """Every problem of the names and options the recipe gives its components (``josh.run.spec_check``): the run
    spec, the warm start's scripted agent and user, each arm's (and warm_kto's) GRPO section and the extraction's
    judge."""
    problems = spec_problems(recipe.setup, ("setup",))
    warm = recipe.warm_start
    if warm is not None and warm.enabled and warm.rows is None:
        demo = RunSpec(env=recipe.setup.env, data=recipe.setup.data, agent=warm.agent, user=warm.user)
        problems += spec_problems(demo, ("warm_start",))
    arms = [((key,) if key in ARMS else ("arms", key), recipe.arm_recipe(key)) for key in recipe.arm_keys]
    for where, arm in [*arms, (("warm_kto",), recipe.warm_kto)]:
        problems += train_problems(arm, where) if arm is not None else []
    if recipe.extract.judge is not None:
        problems += judge_problems(recipe.extract.judge, ("extract", "judge"))
    return problems


def _setup_problems(setup: Any) -> list[str]:
    """The component problems of a recipe's ``setup`` when the rest of the recipe is invalid, so that one error
    names them all (none when ``setup`` is itself invalid: its own errors say why)."""
    try:
        spec = RunSpec.model_validate(setup if setup is not None else {})
    except ValidationError:
        return []
    return spec_problems(spec, ("setup",))


def load_loop_recipe(path: str | Path, overrides: list[str] | None = None) -> LoopRecipe:
    """Read a loop recipe YAML file and apply ``--set`` overrides (e.g. ``--set rounds=2``); every key is checked, at
    every depth, the components' options included (``RecipeError`` with one line per problem)."""
    data = read_mapping(Path(path))
    merged = apply_overrides(data, overrides or [])
    try:
        recipe = LoopRecipe.model_validate(merged)
    except ValidationError as exc:
        raise recipe_error(explain(exc, LoopRecipe) + _setup_problems(merged.get("setup")), str(path)) from None
    if problems := component_problems(recipe):
        raise recipe_error(problems, str(path))
    return recipe
