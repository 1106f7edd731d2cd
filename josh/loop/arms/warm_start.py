"""The warm start (``round-0/warmstart/``): scripted demonstrations in the agent's format, or the first rows of a file
(``warm_start.rows``), trained with the sft recipe into the policy that searches round 1, evaluated (each further
training draw too) and compared with the base model; with ``warm_kto``, KTO on it (``round-0/warmstart-kto/``), which
searches round 1 instead under ``warm_start.searches: kto``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from josh.loop.arms.base import BASE, WARM_START, RoundZeroServices
from josh.loop.recipe import WarmStartSpec
from josh.loop.stages import RowsStage, WarmStartStage
from josh.training.recipe import TrainRecipe
from josh.util.layout import WARMSTART_ROWS

WARM_KTO = "warm start+KTO"  # the report label of KTO on the warm start (warm_kto)


@dataclass
class WarmStart:
    """What the warm start gives the loop: its SFT rows, the policy that searches round 1 and its label, and the KTO
    rows of ``warm_kto`` (which control-more trains on)."""

    rows: Path
    policy: Path
    label: str
    kto_rows: Path | None = None


def run_warm_start(loop: RoundZeroServices, config: WarmStartSpec) -> WarmStart:
    """The warm start's rows, its SFT model (evaluated unless ``config.evaluate`` is false) and, with ``warm_kto``,
    KTO on it; ``ValueError`` when the policy that should search round 1 could not be trained."""
    folder = loop.run_dir / "round-0" / "warmstart"
    rows = warm_rows(loop, config)
    arm = loop.recipe.warm_sft
    assert arm is not None
    train = loop.train_stage("warm-start train", folder / "train", arm, [rows], "sft")
    if train.adapter is None:
        raise ValueError(f"the warm start could not be trained: {train.why_ended()}")
    if config.evaluate:
        loop.evaluate(WARM_START, 0, folder / "eval", train.adapter, WARM_START)
    loop.seed_variants(WARM_START, folder / "train", folder / "eval", [rows], arm=arm, evaluate=config.evaluate)
    if config.evaluate:
        loop.result.compare(WARM_START, BASE, "warm start", optional_baseline=True)
    start = WarmStart(rows=rows, policy=train.adapter, label=WARM_START)
    if loop.recipe.warm_kto is not None:
        start.kto_rows, kto = warm_kto(loop, config, train.adapter, loop.recipe.warm_kto)
        if config.searches == "kto":
            if kto is None:
                raise ValueError("warm_start.searches is kto, but KTO on the warm start trained no model")
            start.policy, start.label = kto, WARM_KTO
    return start


def warm_rows(loop: RoundZeroServices, config: WarmStartSpec) -> Path:
    """Scripted demonstrations in the agent's format, or ``limit`` rows of ``config.rows``; returns their SFT
    file."""
    folder = loop.run_dir / "round-0" / "warmstart" / "data"
    stage: WarmStartStage | RowsStage = (
        RowsStage(loop.ctx, "warm-start data", folder, config.rows, config.limit, WARMSTART_ROWS, config.rows_seed)
        if config.rows is not None
        else WarmStartStage(loop.ctx, config)
    )
    loop.ctx.execute(stage)
    return stage.rows


def warm_kto(
    loop: RoundZeroServices, config: WarmStartSpec, adapter: Path, arm: TrainRecipe
) -> tuple[Path, Path | None]:
    """KTO on the warm start (``warm_kto``): the warm-start adapter merged into a full model, which is also KTO's
    reference, trained on ``kto_limit`` rows of ``config.kto_rows``, evaluated and compared with the warm start;
    with ``train_seeds``, again on each further draw of the warm start. Returns the KTO rows and the KTO adapter, if
    trained."""
    assert config.kto_rows is not None and loop.recipe.sft is not None
    folder = loop.run_dir / "round-0" / "warmstart-kto"
    rows = RowsStage(
        loop.ctx, "warm-start KTO data", folder / "data", config.kto_rows, config.kto_limit, "kto.jsonl",
        config.rows_seed,
    )  # fmt: skip
    loop.ctx.execute(rows)
    good, bad = loop.ctx.kto_labels([rows.rows])
    if not (good and bad):
        loop.note(WARM_KTO, 0, f"KTO needs good and bad turns; its rows have {good} good and {bad} bad")
        return rows.rows, None
    dtype = loop.recipe.sft.model.dtype
    base = loop.merge("warm-start merge", adapter, folder / "merge", dtype)
    train = loop.train_stage("warm-start train-kto", folder / "train", arm, [rows.rows], "kto", base=base)
    if train.adapter is None:
        loop.note(WARM_KTO, 0, f"could not be trained: {train.why_ended()}")
        return rows.rows, None
    loop.evaluate(WARM_KTO, 0, folder / "eval", train.adapter, "kto")
    bases = loop.merge_draws("warm-start merge", loop.draws.get(WARM_START, []), folder / "merge", dtype)
    loop.seed_variants(WARM_KTO, folder / "train", folder / "eval", [rows.rows], arm=arm, method="kto", bases=bases)
    loop.result.compare(WARM_KTO, WARM_START, "KTO on SFT", optional_baseline=True)
    loop.result.compare(WARM_KTO, BASE, "vs base", optional_baseline=True)
    return rows.rows, train.adapter
