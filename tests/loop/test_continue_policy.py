"""A round that continues the warm start's KTO model (the pre-registered paper round, issue 65), on the scripted loop:
``warm_start.searches: kto``, both JOSH arms on that policy merged (``sft_from: merged-policy``, ``kto_from:
policy``), ``controls.more`` matching their optimizer steps on the policy's own rows, ``train_seeds`` for every
model, and ``rollout.exclude`` keeping the warm start's tasks out of the search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from josh.loop.arms.warm_start import WARM_KTO
from josh.loop.runner import Loop
from josh.loop.seeds import rebuild
from josh.loop.stages.manifest import input_digest, read_manifest
from josh.run.components import ComponentOptions
from tests.fakes.loop import RecordingTrainer, builder, lines, merger, searching_builder
from tests.loop.plumbing import recipe
from tests.loop.test_warm_rows import KTO_ARM, rows_files

CONTINUE = {"sft_from": "merged-policy", "kto_from": "policy", "controls": {"more": True}, "train_seeds": 2}


def paper_round(tmp_path: Path, **changes: Any) -> Any:
    sft, kto = tmp_path / "paper" / "sft.jsonl", tmp_path / "paper" / "kto.jsonl"
    if not sft.is_file():
        rows_files(tmp_path)
    warm = {"rows": str(sft), "kto_rows": str(kto), "searches": "kto"}
    return recipe(tmp_path, warm_start=warm, warm_kto=KTO_ARM, **{**CONTINUE, **changes})


def test_the_kto_warm_start_searches_and_both_arms_continue_it_beside_step_matched_controls(tmp_path: Path) -> None:
    trainer, searched = RecordingTrainer(), []

    Loop(
        paper_round(tmp_path), trainer=trainer, builder=searching_builder(searched), merger=merger, progress=False
    ).run()
    run_dir, r1 = tmp_path / "scripted", tmp_path / "scripted" / "round-1"
    kto_dir = run_dir / "round-0" / "warmstart-kto"
    assert searched == [str(kto_dir / "train")]  # (c), KTO on the warm start, searches
    assert read_manifest(r1 / "rollouts").inputs["policy"] == input_digest(kto_dir / "train")
    merged = json.loads((r1 / "merge-policy" / "config.json").read_text())
    assert merged["merged_from"] == str(kto_dir / "train")
    seed1 = json.loads((r1 / "merge-policy-seed1" / "config.json").read_text())
    assert seed1["merged_from"] == str(kto_dir / "train-seed1")  # each draw continues (c) of its own seed
    assert trainer.recipes[str(kto_dir / "train-seed1")].model.name == str(kto_dir / "merge-seed1")

    recipes = trainer.recipes
    for arm, control in (("train-sft", "control-more-sft"), ("train-kto", "control-more-kto")):
        josh, matched = recipes[str(r1 / arm)], recipes[str(r1 / control / "train")]
        assert josh.model.name == matched.model.name == str(r1 / "merge-policy")
        assert recipes[str(r1 / f"{arm}-seed1")].model.name == str(r1 / "merge-policy-seed1")
        assert recipes[str(r1 / control / "train-seed1")].model.name == str(r1 / "merge-policy-seed1")
        steps = json.loads((r1 / arm / "metrics.json").read_text())["global_step"]
        assert matched.optim.max_steps == steps and matched.seed == josh.seed and matched.method == josh.method
    own_sft = lines(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    assert lines(r1 / "control-more-sft" / "train" / "data.jsonl") == own_sft  # the policy's own rows only
    assert lines(r1 / "control-more-kto" / "train" / "data.jsonl") == lines(kto_dir / "data" / "kto.jsonl")
    assert len(lines(r1 / "train-sft" / "data.jsonl")) > len(own_sft)  # JOSH-SFT: the same rows plus its paths

    report = rebuild(run_dir)
    assert report.headline is not None and report.headline.baseline == WARM_KTO
    assert report.headline.model == "round 1 JOSH-SFT"
    pairs = {(p.model, p.baseline) for p in report.comparisons}
    for pair in [
        ("round 1 JOSH-KTO", WARM_KTO),
        ("round 1 JOSH-SFT", "round 1 control-more SFT"),
        ("round 1 JOSH-KTO", "round 1 control-more KTO"),
    ]:
        assert pair in pairs, pair
    for label in (WARM_KTO, "round 1 JOSH-SFT", "round 1 JOSH-KTO", "round 1 control-more KTO"):
        assert len(report.model(label).seed_rewards) == 2, label

    stages = {s.folder: s for s in report.stages}
    assert stages["round-1/rollouts"].complete and stages["round-1/rollouts"].wall_s is not None
    assert len(stages["round-1/control-more-kto/eval-seed1"].load_end or []) == 3
    assert "| round 1 train control-more KTO | round-1/control-more-kto/train |" in (run_dir / "report.md").read_text()
    calls = len(trainer.calls)
    Loop(paper_round(tmp_path), trainer=trainer, builder=builder, merger=merger, progress=False).run()
    assert len(trainer.calls) == calls  # a rerun finds every stage done


def test_excluded_tasks_are_never_searched(tmp_path: Path) -> None:
    ids = [t.id for t in builder(ComponentOptions(split="train")).tasks]
    listed = tmp_path / "covered.jsonl"
    listed.write_text("".join(json.dumps({"task_id": i}) + "\n" for i in ids[6:9]))
    data = recipe(tmp_path, kto=None, rollout={"skip": 6, "tasks": 4, "exclude": str(listed)})
    loop = Loop(data, builder=builder, trainer=RecordingTrainer(), merger=merger, progress=False)
    loop.run()
    searched = json.loads((tmp_path / "scripted" / "round-1" / "rollouts" / "manifest.json").read_text())
    assert searched["config"]["tasks"] == [i for i in ids if i not in ids[6:9]][6:10]
    text = tmp_path / "covered.txt"
    text.write_text("\n".join(ids) + "\n")
    with pytest.raises(ValueError, match="no rollout tasks: 0 train tasks after exclude and skip=6"):
        Loop(recipe(tmp_path, kto=None, rollout={"skip": 6, "exclude": str(text), "tasks": 2}), builder=builder).run()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"controls": {"more": True}}, "controls.more trains the searching policy further"),
        ({"warm_start": {"tasks": 6, "searches": "kto"}}, "warm_start.searches: kto searches with KTO"),
        ({"warm_start": {"tasks": 6, "evaluate": False}}, "warm_start.evaluate: false leaves out"),
    ],
)
def test_settings_that_cannot_work_are_refused(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recipe(tmp_path, **changes)


def test_a_warm_start_left_unevaluated_is_still_trained_at_every_seed_for_the_kto_model_that_searches(
    tmp_path: Path,
) -> None:
    data = paper_round(tmp_path, controls={}, sft_from="base", kto_from="base")
    data.warm_start = data.warm_start.model_copy(update={"evaluate": False})
    trainer = RecordingTrainer()
    result = Loop(data, trainer=trainer, builder=builder, merger=merger, progress=False).run()
    labels = [e.label for e in result.evaluated]
    assert "warm start" not in labels and WARM_KTO in labels
    warm = tmp_path / "scripted" / "round-0" / "warmstart"
    assert (warm / "train-seed1" / "metrics.json").is_file() and not (warm / "eval").exists()
    assert trainer.recipes[str(warm.with_name("warmstart-kto") / "train-seed1")].model.name.endswith("merge-seed1")
    assert not any(p.baseline == "warm start" for p in result.pairs)
