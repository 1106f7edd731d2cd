"""JOSH-SFT: the round's ideal paths (with ``accumulate``, the warm-start rows and every earlier round's too), trained
fresh from the base model, continuing the adapter that searched (``sft_from: policy``), or on a fresh adapter of the
policy that searched, merged into a full model (``sft_from: merged-policy``)."""

from __future__ import annotations

from typing import ClassVar

from josh.loop.arms.base import ArmBase, LoopServices, Model, Round


class SFTArm(ArmBase):
    key: ClassVar[str] = "sft"
    title: ClassVar[str] = "JOSH-SFT"

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        r, folder = round_.number, round_.folder
        if round_.extracted.sft_rows() == 0:
            loop.note(self.title, r, f"{round_.extracted.harvest()}: not trained this round")
            return None
        rows = [*round_.prior_sft, round_.extracted.sft]
        arm = self.train_recipe(loop.recipe)
        base, bases = (None, None)
        if loop.recipe.sft_from == "merged-policy":
            base, bases = loop.merged_policy(round_, arm.model.dtype)
        train = loop.train_stage(
            f"round {r} train-sft", folder / "train-sft", arm, rows, "sft", start=round_.start, base=base
        )
        model = loop.evaluate_arm(r, self.title, train, folder / "eval-sft", round_.policy_label)
        if model is not None:
            loop.seed_variants(
                model[1], folder / "train-sft", folder / "eval-sft", rows, start=round_.start, bases=bases
            )
        return model
