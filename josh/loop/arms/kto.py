"""JOSH-KTO: the round's good and bad turns (every round's so far with ``accumulate``) on a fresh adapter of the base
model, (``kto_from: sft``) JOSH-SFT+KTO on the round's SFT policy merged into a full model, or (``kto_from: policy``)
on the policy that searched the round, merged; that merged model is then also KTO's reference model."""

from __future__ import annotations

from typing import ClassVar

from josh.loop.arms.base import ArmBase, LoopServices, Model, Round
from josh.loop.recipe import LoopRecipe


class KTOArm(ArmBase):
    key: ClassVar[str] = "kto"
    title: ClassVar[str] = "JOSH-KTO"

    def name(self, recipe: LoopRecipe) -> str:
        return "JOSH-SFT+KTO" if recipe.kto_from == "sft" else self.title

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        recipe, r, folder = loop.recipe, round_.number, round_.folder
        assert recipe.kto is not None
        arm, sft = self.name(recipe), round_.models.get("sft")
        rows = [*(loop.kto_sources if recipe.accumulate else []), round_.extracted.kto]
        good, bad = loop.ctx.kto_labels(rows)
        if not (good and bad):
            loop.note(arm, r, f"KTO needs good and bad turns; its rows have {good} good and {bad} bad")
            return None
        base, bases = None, None
        if recipe.kto_from == "policy":
            base, bases = loop.merged_policy(round_, recipe.kto.model.dtype)
        if recipe.kto_from == "sft":
            if sft is None or recipe.sft is None:
                loop.note(arm, r, "there is no SFT policy of this round to train KTO on")
                return None
            base = loop.merge(f"round {r} merge-sft", sft[0], folder / "merge-sft", recipe.sft.model.dtype)
        train = loop.train_stage(f"round {r} train-kto", folder / "train-kto", recipe.kto, rows, "kto", base=base)
        model = loop.evaluate_arm(r, arm, train, folder / "eval-kto", round_.policy_label)
        if model is None:
            return None
        if recipe.kto_from == "sft" and sft is not None and recipe.sft is not None:
            draws = loop.draws[sft[1]]  # seed_variants recorded one entry per further seed
            bases = loop.merge_draws(f"round {r} merge-sft", draws, folder / "merge-sft", recipe.sft.model.dtype)
        loop.seed_variants(
            model[1], folder / "train-kto", folder / "eval-kto", rows, arm=recipe.kto, method="kto", bases=bases
        )
        if sft is not None and recipe.kto_from != "policy":
            loop.result.compare(model[1], sft[1], "KTO on SFT")
        return model
