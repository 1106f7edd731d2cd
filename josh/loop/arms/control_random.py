"""control-random: the round's trees without reward selection, one random root-to-leaf branch per tree (as many rows
as JOSH-SFT's with ``controls.random_rows: match``), trained exactly like the SFT arm. With ``accumulate`` it trains
on the warm-start rows plus every round's random branches so far, never on an ideal path, so it differs from
JOSH-SFT in the selection of every round. ``controls.rounds`` picks the rounds it trains in; a round before a later
control round still draws its rows (``round-R/control-random/data/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from josh.loop.arms.base import LoopServices, Round
from josh.loop.stages import ExtractStage

NAME = "control-random"


class ControlSources(LoopServices, Protocol):
    """The loop's services plus the control's rows so far and its extraction stage."""

    control_sources: list[Path]

    def extract(
        self, round_: int, rollouts: object, *, control_seed: int | None = None, control_rows: int | None = None
    ) -> ExtractStage: ...


def trains_in(loop: LoopServices, r: int) -> bool:
    """Whether control-random trains a model in round ``r``."""
    controls = loop.recipe.controls
    return controls.random and (controls.rounds is None or r in controls.rounds)


def draws_in(loop: LoopServices, r: int) -> bool:
    """Whether round ``r`` draws control rows: it trains, or a later round trains on the rows accumulated so far."""
    controls = loop.recipe.controls
    later = controls.random and loop.recipe.accumulate and any(c > r for c in controls.rounds or ())
    return trains_in(loop, r) or later


def run_control_random(loop: ControlSources, round_: Round) -> Path | None:
    """Draw (and, in a control round, train and evaluate) the round's random branches; returns their folder."""
    recipe, r, folder = loop.recipe, round_.number, round_.folder
    assert recipe.sft is not None
    train = trains_in(loop, r)
    limit = round_.extracted.sft_rows() if recipe.controls.random_rows == "match" else None
    if limit == 0:
        if train:
            loop.note(NAME, r, "JOSH kept no row this round, so a matched control has nothing to train")
        return None
    data = loop.extract(r, round_.rollouts, control_seed=recipe.seed or 0, control_rows=limit)
    prior = list(loop.control_sources) if recipe.accumulate else []
    if recipe.accumulate and data.sft_rows():
        loop.control_sources.append(data.sft)
    if not train:
        return data.folder
    if data.sft_rows() == 0:
        loop.note(NAME, r, "no random branch kept a turn (every first turn failed): nothing to train")
        return data.folder
    rows = [*prior, data.sft]
    control = folder / NAME
    stage = loop.train_stage(f"round {r} train {NAME}", control / "train", recipe.sft, rows, "sft", start=round_.start)
    model = loop.evaluate_arm(r, NAME, stage, control / "eval", None)
    if model is not None:
        loop.seed_variants(model[1], control / "train", control / "eval", rows, start=round_.start)
        loop.result.compare(model[1], round_.policy_label, "control", optional_baseline=True)
        sft = round_.models.get("sft")
        if sft is not None:
            loop.result.compare(sft[1], model[1], "JOSH vs control")
    return data.folder
