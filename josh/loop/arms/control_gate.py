"""control-gate: what the judge gate (``extract.judge``) adds. With ``controls.gate``, each round's trees are extracted
again without the gate (``round-R/control-gate/data/``) and the SFT arm's training is repeated on those rows
(``train/``, ``eval/``): the same trees, the same start, the same training recipe, only the gate differs. The report
compares JOSH-SFT (gated) with it, paired per held-out task. With ``accumulate`` it trains on the warm-start rows
plus every round's ungated rows so far, as JOSH-SFT does on its gated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from josh.harvest.extract import ExtractConfig, extract
from josh.loop.arms.base import ArmBase, LoopServices, Model, Round
from josh.loop.recipe import LoopRecipe
from josh.loop.stages import Stage, StageContext
from josh.loop.stages.extraction import policy_frame
from josh.loop.stages.manifest import Input
from josh.util.layout import EXTRACT_STATS, rows_file

NAME = "control-gate"


class UngatedExtractStage(Stage):
    """Round ``round_``'s SFT / KTO / DPO rows from ``trees`` by the recipe's ``extract`` rules without the gate."""

    def __init__(self, ctx: StageContext, round_: int, trees: Path) -> None:
        super().__init__(ctx, f"round {round_} {NAME} data", ctx.run_dir / f"round-{round_}" / NAME / "data")
        self.trees, self.sft = trees, self.folder / rows_file("sft")

    def config(self) -> ExtractConfig:
        return self.ctx.recipe.extract.model_copy(update={"judge": None})

    def settings(self) -> dict[str, Any]:
        return {"extract": self.config().model_dump(mode="json"), "agent": self.ctx.recipe.setup.agent}

    def inputs(self) -> dict[str, Input]:
        return {"trees": self.trees}

    def outputs(self) -> list[Path]:
        return [self.sft, self.folder / rows_file("kto"), self.folder / rows_file("dpo"), self.folder / EXTRACT_STATS]

    def done(self) -> bool:
        return (self.folder / EXTRACT_STATS).is_file()  # written after the rows; a format with no rows has no file

    def run(self) -> None:
        stats = extract(self.trees, self.folder, self.config(), reframe=policy_frame(self.ctx))
        self.ctx.log(f"  {stats.sft} SFT rows without the judge gate")


def ungated(path: Path) -> Path:
    """The ungated counterpart of an earlier round's gated SFT rows (``round-R/extract/sft.jsonl``); other rows (the
    warm start's) are their own."""
    if path.parent.name == "extract" and path.parent.parent.name.startswith("round-"):
        return path.parent.parent / NAME / "data" / path.name
    return path


class GateControlArm(ArmBase):
    """See the module docstring: JOSH-SFT's training on the ungated rows of the same trees."""

    key: ClassVar[str] = "control_gate"
    title: ClassVar[str] = NAME

    def enabled(self, recipe: LoopRecipe) -> bool:
        return recipe.controls.gate and recipe.sft is not None and recipe.extract.judge is not None

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        recipe, r, folder = loop.recipe, round_.number, round_.folder / NAME
        assert recipe.sft is not None
        data = UngatedExtractStage(loop.ctx, r, round_.rollouts.trees)
        loop.ctx.execute(data)
        rows = [*map(ungated, round_.prior_sft), data.sft]
        if not any(loop.ctx.rows(p) for p in rows):
            loop.note(NAME, r, "no ideal path gave a row even without the gate: nothing to train")
            return None
        train = loop.train_stage(
            f"round {r} train {NAME}", folder / "train", recipe.sft, rows, "sft", start=round_.start
        )
        model = loop.evaluate_arm(r, NAME, train, folder / "eval", None)
        if model is None:
            return None
        loop.seed_variants(model[1], folder / "train", folder / "eval", rows, start=round_.start)
        sft = round_.models.get("sft")
        if sft is not None:
            loop.result.compare(sft[1], model[1], "gate vs no gate")
        return model
