"""control-more: what a JOSH arm that continues the searching policy gains from the round's rows rather than from
more training. Each such arm (``sft_from: merged-policy``, ``kto_from: policy``) is trained again from the same start
(the searching policy, merged), with the same recipe and seed, for exactly as many optimizer steps, on the policy's
own warm-start rows (``warm_start.rows`` for SFT, the warm start's KTO rows for KTO) instead of the round's. JOSH's
model is compared with it paired per task ("JOSH vs control"); only the rows differ."""

from __future__ import annotations

import json
from pathlib import Path

from josh.loop.arms.base import LoopServices, Model, Round
from josh.util.layout import METRICS

NAME = "control-more"


def trained_steps(model: Path) -> int | None:
    """The optimizer steps a trained model took (its ``metrics.json``), or ``None`` before it was trained."""
    metrics = model / METRICS
    if not metrics.is_file():
        return None
    steps = json.loads(metrics.read_text(encoding="utf-8")).get("global_step")
    return steps if isinstance(steps, int) and steps > 0 else None


def run_control_more(loop: LoopServices, round_: Round, own_sft: Path | None, own_kto: Path | None) -> None:
    """Train and evaluate the control of each arm of ``round_`` that continues the searching policy."""
    recipe = loop.recipe
    arms = [
        ("sft", "SFT", own_sft, recipe.sft_from == "merged-policy"),
        ("kto", "KTO", own_kto, recipe.kto_from == "policy"),
    ]
    for key, method, own, continues in arms:
        if continues and recipe.arm_recipe(key) is not None:
            _control(loop, round_, key, f"{NAME} {method}", own)


def _control(loop: LoopServices, round_: Round, key: str, name: str, own: Path | None) -> None:
    r, folder = round_.number, round_.folder / f"{NAME}-{key}"
    arm, trained = loop.recipe.arm_recipe(key), round_.models.get(key)
    assert arm is not None
    if trained is None:
        loop.note(name, r, "the JOSH arm it matches trained no model this round")
        return
    if own is None:
        loop.note(name, r, "the searching policy has no rows of its own to train on")
        return
    steps = trained_steps(trained[0])
    if steps is not None:  # unknown only in a plan, before JOSH's arm has trained
        arm = arm.model_copy(update={"optim": arm.optim.model_copy(update={"max_steps": steps, "min_steps": 0})})
    base, bases = loop.merged_policy(round_, arm.model.dtype)
    train = loop.train_stage(f"round {r} train {name}", folder / "train", arm, [own], key, base=base)
    control: Model | None = loop.evaluate_arm(r, name, train, folder / "eval", None)
    if control is None:
        return
    loop.seed_variants(control[1], folder / "train", folder / "eval", [own], arm=arm, method=key, bases=bases)
    loop.result.compare(control[1], round_.policy_label, "control", optional_baseline=True)
    loop.result.compare(trained[1], control[1], "JOSH vs control")
