"""control-retrain: the start policy retrained on its own warm-start rows with another training seed and row order
(``round-0/control-retrain/``): how far a model moves by training noise alone, the floor JOSH's increment is read
against."""

from __future__ import annotations

from pathlib import Path

from josh.loop.arms.base import RETRAIN, RoundZeroServices

RETRAIN_SEED_OFFSET = 1000  # control-retrain's training seed, past the warm start's


def run_control_retrain(loop: RoundZeroServices, warm: Path | None, start: str) -> None:
    """Retrain the start policy on ``warm`` (its rows) and compare it with the start policy ``start``."""
    arm = loop.recipe.warm_sft
    if warm is None or arm is None:
        loop.note(RETRAIN, 0, "the start policy is the base model, with no rows of its own to retrain on")
        return
    folder = loop.run_dir / "round-0" / "control-retrain"
    train = loop.train_stage(
        "control-retrain train", folder / "train", arm, [warm], "sft", seed_offset=RETRAIN_SEED_OFFSET, shuffle=True
    )
    if train.adapter is None:
        loop.note(RETRAIN, 0, f"could not be trained: {train.why_ended()}")
        return
    loop.evaluate(RETRAIN, 0, folder / "eval", train.adapter, RETRAIN)
    loop.result.compare(RETRAIN, start, "noise floor")
