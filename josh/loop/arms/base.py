"""What an arm of the loop is. Each round, after the search and its extraction, every arm the recipe enables trains
one model from what the round produced and evaluates it on the held-out tasks; the policy arm's model searches the
next round. An arm is one object with a ``key`` (its recipe section, and its name in ``policy:``), a report ``name``
and a ``run`` that trains and evaluates through the loop's services (``LoopServices``); ``josh.loop.arms`` lists them
in the order they run (an arm may use the models of the arms before it, e.g. KTO on the round's SFT policy).

A model's label in the report is a ``Label``: ``model_label(round, name)`` (``round 2 JOSH-SFT``), or one of the
models outside the rounds, ``BASE``, ``WARM_START`` and ``RETRAIN``. An arm's model is costed by the searches it
learned from, unless the arm rolls out on its own and records its training folder in the round's
``own_rollouts`` (GRPO; ``josh.loop.costs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NewType, Protocol

from josh.loop.recipe import LoopRecipe
from josh.loop.result import RETRAIN, LoopResult
from josh.loop.stages import ExtractStage, RolloutStage, StageContext, TrainStage
from josh.training.recipe import TrainRecipe

Label = NewType("Label", str)  # a model's name in the report
Model = tuple[Path, Label]  # an evaluated adapter and its label
BASE = Label("base")
WARM_START = Label("warm start")
__all__ = [
    "BASE",
    "RETRAIN",
    "WARM_START",
    "Arm",
    "ArmBase",
    "Label",
    "LoopServices",
    "Model",
    "Round",
    "RoundZeroServices",
    "model_label",
]


def model_label(round_: int, arm: str) -> Label:
    """The report label of ``arm``'s model of round ``round_``."""
    return Label(f"round {round_} {arm}")


@dataclass
class Round:
    """What one round gives its arms: its number and folder, the search and its extraction, the policy that searched
    (and its label), the adapter the SFT arm continues (``sft_from: policy``), the SFT rows of earlier rounds, the
    models the arms before have trained this round (by key; ``None`` for an arm that ended without one), and the
    searching policy merged, once an arm asked for it (``LoopServices.merged_policy``)."""

    number: int
    folder: Path
    rollouts: RolloutStage
    extracted: ExtractStage
    policy: str | Path
    policy_label: str
    start: Path | None
    prior_sft: list[Path]
    models: dict[str, Model | None] = field(default_factory=dict)
    merged: tuple[Path | None, list[Path | None] | None] | None = None  # LoopServices.merged_policy, once made

    def label(self, arm: str) -> Label:
        return model_label(self.number, arm)


class LoopServices(Protocol):
    """What an arm may ask of the loop (``josh.loop.runner.Loop``)."""

    recipe: LoopRecipe
    ctx: StageContext
    kto_sources: list[Path]
    draws: dict[str, list[Path | None]]
    grpo_start: Path | None

    @property
    def result(self) -> LoopResult: ...

    def train_stage(self, name: str, folder: Path, arm: TrainRecipe, *args: Any, **how: Any) -> TrainStage: ...

    def evaluate_arm(
        self, r: int, arm: str, train: TrainStage, folder: Path, policy_label: str | None
    ) -> Model | None: ...

    def merge(self, name: str, adapter: Path, folder: Path, dtype: str) -> Path: ...

    def merge_draws(self, name: str, draws: list[Path | None], folder: Path, dtype: str) -> list[Path | None]:
        """Each further training draw merged into ``<folder>-seed<k>/`` (``None`` where a draw is missing)."""
        ...

    def merged_policy(self, round_: Round, dtype: str) -> tuple[Path | None, list[Path | None] | None]:
        """The round's searching policy merged into a full model, and its further training draws merged (one entry
        per further seed); ``(None, None)`` when it is the base model."""
        ...

    def note(self, arm: str, round_: int, message: str) -> None: ...

    def seed_variants(self, label: str, train: Path, evaluation: Path, rows: list[Path], **how: Any) -> None:
        """``train_seeds``: the model ``label`` again at each further training seed (``arm``, ``method``, ``bases``
        and the training stage's keywords in ``how``)."""
        ...


class RoundZeroServices(LoopServices, Protocol):
    """The loop's services plus its run folder and plain evaluation: what the models of round 0 (the warm start,
    control-retrain) ask of the loop."""

    run_dir: Path

    def evaluate(self, label: str, round_: int, folder: Path, model: str | Path, arm: str) -> None: ...


class Arm(Protocol):
    """One training arm of a round; see the module docstring."""

    key: ClassVar[str]

    def name(self, recipe: LoopRecipe) -> str:
        """The arm's name in the report (``JOSH-SFT``, ...)."""
        ...

    def enabled(self, recipe: LoopRecipe) -> bool: ...

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        """Train and evaluate the round's model; ``None`` (with a note) when there is nothing to train."""
        ...


class ArmBase:
    """What most arms share: a report name of their own (``title``), trained when the recipe holds a training recipe
    under the arm's key (its own section, or ``arms:``)."""

    key: ClassVar[str]
    title: ClassVar[str]

    def name(self, recipe: LoopRecipe) -> str:
        return self.title

    def enabled(self, recipe: LoopRecipe) -> bool:
        return recipe.arm_recipe(self.key) is not None

    def train_recipe(self, recipe: LoopRecipe) -> TrainRecipe:
        """The arm's training recipe (the arm is enabled)."""
        arm = recipe.arm_recipe(self.key)
        if arm is None:
            raise ValueError(f"the recipe trains no {self.key} arm")
        return arm
