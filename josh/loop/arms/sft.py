"""JOSH-SFT: the round's ideal paths (with ``accumulate``, the warm-start rows and every earlier round's too), trained
fresh from the base model, or continuing the adapter that searched (``sft_from: policy``)."""

from __future__ import annotations

from typing import ClassVar

from josh.loop.arms.base import LoopServices, Model, Round
from josh.loop.recipe import LoopRecipe


class SFTArm:
    key: ClassVar[str] = "sft"

    def name(self, recipe: LoopRecipe) -> str:
        return "JOSH-SFT"

    def enabled(self, recipe: LoopRecipe) -> bool:
        return recipe.sft is not None

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        recipe, r, folder = loop.recipe, round_.number, round_.folder
        assert recipe.sft is not None
        if round_.extracted.sft_rows() == 0:
            loop.note("JOSH-SFT", r, f"{round_.extracted.harvest()}: not trained this round")
            return None
        rows = [*round_.prior_sft, round_.extracted.sft]
        train = loop.train_stage(
            f"round {r} train-sft", folder / "train-sft", recipe.sft, rows, "sft", start=round_.start
        )
        model = loop.evaluate_arm(r, "JOSH-SFT", train, folder / "eval-sft", round_.policy_label)
        if model is not None:
            loop.seed_variants(model[1], folder / "train-sft", folder / "eval-sft", rows, start=round_.start)
        return model
