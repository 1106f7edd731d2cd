"""JOSH-tree: from the round's trees, every sibling turn with its tree advantage (``round-R/extract-tree/tree.jsonl``),
trained with the advantage-weighted loss as a continuation of the adapter that searched the round (a fresh adapter
when the base model searched). It costs no LLM call beyond the search."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from josh.loop.arms.base import ArmBase, LoopServices, Model, Round
from josh.loop.stages import TreeExtractStage


class TreeArm(ArmBase):
    key: ClassVar[str] = "tree"
    title: ClassVar[str] = "JOSH-tree"

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        r, folder = round_.number, round_.folder
        data = TreeExtractStage(loop.ctx, r, round_.rollouts.trees)
        loop.ctx.execute(data)
        loop.result.rounds[-1].tree = data.folder
        if data.row_count() == 0:
            loop.note(self.title, r, "no sibling turns with unequal subtree rewards: nothing to train")
            return None
        start = round_.policy if isinstance(round_.policy, Path) else None
        train = loop.train_stage(
            f"round {r} train-tree",
            folder / "train-tree",
            self.train_recipe(loop.recipe),
            [data.rows],
            "tree",
            start=start,
        )
        model = loop.evaluate_arm(r, self.title, train, folder / "eval-tree", round_.policy_label)
        sft = round_.models.get("sft")
        if model is not None and sft is not None:
            loop.result.compare(model[1], sft[1], "tree vs SFT")
        return model
