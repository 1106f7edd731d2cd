"""The loop's arms beyond JOSH-SFT on the scripted loop: KTO on the merged SFT policy, the two controls, and arms
that end with a note when they have nothing to train on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from josh.loop.report import load_loop_report
from josh.loop.runner import Loop
from josh.loop.seeds import rebuild
from josh.loop.stages.manifest import read_manifest
from tests.fakes.loop import RecordingTrainer, StubTrainer, builder, hopeless, lines, merger
from tests.loop.plumbing import recipe  # a small held-out evaluation: no test here reads a score


def test_kto_on_sft_and_both_controls(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto_from": "sft", "controls": {"random": True, "retrain": True}}
    loop = Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, merger=merger, progress=False)
    result = loop.run()
    run_dir = tmp_path / "scripted"
    labels = [e.label for e in result.evaluated]
    assert labels == ["base", "warm start", "control-retrain", "round 1 JOSH-SFT", "round 1 JOSH-SFT+KTO"] + [
        "round 1 control-random"
    ]
    round1 = run_dir / "round-1"
    kto = trainer.recipes[str(round1 / "train-kto")]
    assert kto.method == "kto" and kto.model.name == str(round1 / "merge-sft") and kto.model.adapter is None
    assert json.loads((round1 / "merge-sft" / "config.json").read_text())["merged_from"] == str(round1 / "train-sft")

    warm_rows = lines(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    retrain = trainer.recipes[str(run_dir / "round-0" / "control-retrain" / "train")]
    assert retrain.seed == 42 + 1000
    assert sorted(lines(Path(retrain.data))) == sorted(warm_rows)  # its own rows, in another order
    control = trainer.recipes[str(round1 / "control-random" / "train")]
    josh = trainer.recipes[str(round1 / "train-sft")]
    assert control.seed == josh.seed and control.optim == josh.optim  # trained exactly like the SFT arm
    random_rows = lines(round1 / "control-random" / "data" / "sft.jsonl")
    assert lines(Path(control.data)) == warm_rows + random_rows

    report = load_loop_report(run_dir)
    roles = {(c.model, c.baseline): c.role for c in report.comparisons}
    assert roles[("round 1 JOSH-SFT+KTO", "round 1 JOSH-SFT")] == "KTO on SFT"
    assert roles[("round 1 control-random", "warm start")] == "control"
    assert roles[("round 1 JOSH-SFT", "round 1 control-random")] == "JOSH vs control"
    assert roles[("control-retrain", "warm start")] == "noise floor"
    assert roles[("round 1 JOSH-SFT", "control-retrain")] == "JOSH vs control"
    assert (report.headline.model, report.headline.baseline) == ("round 1 JOSH-SFT", "warm start")
    (harvest,) = report.harvest
    assert harvest.trees == 10 and harvest.control_rows == len(random_rows) and harvest.sft_rows >= 1
    assert harvest.control_tokens > 0 and harvest.rewarded >= harvest.accepted
    assert harvest.control_rewarded is not None and 0 <= harvest.control_rewarded <= harvest.control_rows
    markdown = (run_dir / "report.md").read_text()
    assert (
        "control-random rows / tokens (met a goal)" in markdown
        and "| round 1 JOSH-SFT+KTO | round 1 JOSH-SFT | KTO on SFT |" in (markdown)
    )


def test_a_matched_random_control_trains_on_as_many_rows_as_josh(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto": None, "controls": {"random": True, "random_rows": "match"}}
    Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, progress=False).run()
    round1 = tmp_path / "scripted" / "round-1"
    josh_rows = lines(round1 / "extract" / "sft.jsonl")
    random_rows = lines(round1 / "control-random" / "data" / "sft.jsonl")
    stats = json.loads((round1 / "control-random" / "data" / "extract_stats.json").read_text())
    assert 1 <= len(random_rows) == len(josh_rows) < stats["random_pool"]
    first = {json.loads(row)["messages"][0]["content"] for row in [*josh_rows, *random_rows]}
    assert len(first) == 1 and first != {None}  # the control trains with the policy's system prompt, as JOSH does
    warm_rows = lines(tmp_path / "scripted" / "round-0" / "warmstart" / "data" / "sft.jsonl")
    assert lines(Path(trainer.recipes[str(round1 / "control-random" / "train")].data)) == warm_rows + random_rows
    harvest = load_loop_report(tmp_path / "scripted").harvest[0]
    assert harvest.control_rows == harvest.sft_rows == len(josh_rows)


def test_a_last_round_control_trains_on_random_branches_of_every_round(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto": None, "rounds": 2, "controls": {"random": True, "random_rows": "match", "rounds": [2]}}
    result = Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, progress=False).run()
    run_dir = tmp_path / "scripted"
    assert [e.label for e in result.evaluated if "control" in e.label] == ["round 2 control-random"]
    assert not (run_dir / "round-1" / "control-random" / "train").exists()  # round 1 only draws its branches
    warm = lines(run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl")
    drawn = [lines(run_dir / f"round-{r}" / "control-random" / "data" / "sft.jsonl") for r in (1, 2)]
    ideal = [lines(run_dir / f"round-{r}" / "extract" / "sft.jsonl") for r in (1, 2)]
    assert all(1 <= len(d) == len(i) for d, i in zip(drawn, ideal, strict=True))  # matched per round
    control = lines(Path(trainer.recipes[str(run_dir / "round-2" / "control-random" / "train")].data))
    josh = lines(Path(trainer.recipes[str(run_dir / "round-2" / "train-sft")].data))
    assert control == warm + drawn[0] + drawn[1] and josh == warm + ideal[0] + ideal[1]
    assert len(control) == len(josh) and control != josh


def test_warm_start_epochs_train_the_start_and_its_retrain_only(tmp_path: Path) -> None:
    trainer = RecordingTrainer()
    changes = {"kto": None, "train_seeds": 2, "warm_start": {"tasks": 6, "epochs": 8}, "controls": {"retrain": True}}
    Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, progress=False).run()
    run_dir = tmp_path / "scripted"
    epochs = {
        Path(folder).relative_to(run_dir).as_posix(): r.optim.num_train_epochs for folder, r in trainer.recipes.items()
    }
    assert epochs == {
        "round-0/warmstart/train": 8,
        "round-0/warmstart/train-seed1": 8,
        "round-0/control-retrain/train": 8,
        "round-1/train-sft": 1,
        "round-1/train-sft-seed1": 1,
    }
    manifest = read_manifest(run_dir / "round-0" / "warmstart" / "data")
    assert manifest is not None and "epochs" not in manifest.config["warm_start"]  # training does not change rows


def test_a_matched_random_control_without_josh_rows_ends_with_a_note(tmp_path: Path) -> None:
    changes = {"kto": None, "controls": {"random": True, "random_rows": "match"}}
    Loop(recipe(tmp_path, **changes), trainer=StubTrainer(), builder=hopeless, progress=False).run()
    notes = {(n.arm, n.round): n.message for n in load_loop_report(tmp_path / "scripted").notes}
    assert "matched control has nothing to train" in notes["control-random", 1]
    assert not (tmp_path / "scripted" / "round-1" / "control-random").exists()


def test_kto_policy_searches_the_next_round(tmp_path: Path) -> None:
    from josh.loop.stages.manifest import input_digest

    changes = {"kto_from": "sft", "policy": "kto", "rounds": 2}
    Loop(recipe(tmp_path, **changes), trainer=StubTrainer(), builder=builder, merger=merger, progress=False).run()
    run_dir = tmp_path / "scripted"
    manifest = read_manifest(run_dir / "round-2" / "rollouts")
    assert manifest.inputs["policy"] == input_digest(run_dir / "round-1" / "train-kto")
    report = load_loop_report(run_dir)
    assert report.headline.model == "round 2 JOSH-SFT+KTO" and report.headline.baseline == "warm start"
    assert [h.policy for h in report.harvest] == ["warm start", "round 1 JOSH-SFT+KTO"]
    kto_rows = [lines(run_dir / f"round-{r}" / "extract" / "kto.jsonl") for r in (1, 2)]
    assert lines(run_dir / "round-2" / "train-kto" / "data.jsonl") == kto_rows[0] + kto_rows[1]  # accumulate


def test_rounds_without_tasks_fail_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="round 21 has no rollout tasks"):
        Loop(recipe(tmp_path, rounds=25), trainer=StubTrainer(), builder=builder, progress=False).run()
    assert not (tmp_path / "scripted" / "round-0").exists()


def test_arms_with_nothing_to_train_on_end_with_a_note_and_the_loop_goes_on(tmp_path: Path) -> None:
    changes = {"rounds": 2, "warm_start": None, "controls": {"retrain": True}}
    result = Loop(recipe(tmp_path, **changes), trainer=StubTrainer(), builder=hopeless, progress=False).run()
    run_dir = tmp_path / "scripted"
    assert (run_dir / "round-2" / "rollouts" / "trees.jsonl").is_file()  # round 2 still searched
    assert [e.label for e in result.evaluated] == ["base"]
    report = load_loop_report(run_dir)
    ended = {(n.arm, n.round) for n in report.notes}
    assert ended == {("control-retrain", 0), ("JOSH-SFT", 1), ("JOSH-KTO", 1), ("JOSH-SFT", 2), ("JOSH-KTO", 2)} | {
        ("JOSH", 0)
    }
    sft_note = next(n.message for n in report.notes if n.arm == "JOSH-SFT")
    assert "0 of 10 trees rewarded" in sft_note and report.headline is None
    markdown = (run_dir / "report.md").read_text()
    assert "## Arms that ended without a model" in markdown and "**JOSH increment: none (" in markdown


def test_a_trainer_refusal_ends_that_arm_only_and_is_remembered(tmp_path: Path) -> None:
    trainer = RecordingTrainer(refuse="train-kto")
    Loop(recipe(tmp_path), trainer=trainer, builder=builder, progress=False).run()
    run_dir = tmp_path / "scripted"
    note = next(n for n in load_loop_report(run_dir).notes if n.arm == "JOSH-KTO")
    assert "fewer than one batch" in note.message
    assert (run_dir / "round-1" / "train-kto" / "ended.txt").is_file()
    again = RecordingTrainer(refuse="train-kto")
    assert Loop(recipe(tmp_path), trainer=again, builder=builder, progress=False).run().ran == []
    assert again.calls == []


def test_report_of_a_killed_loop_says_where_it_stopped(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        Loop(recipe(tmp_path), trainer=StubTrainer(fail_on=2), builder=builder, progress=False).run()
    report = rebuild(tmp_path / "scripted")
    assert report.unfinished == "round 1 train-sft"
    assert [m.label for m in report.models] == ["base", "warm start"] and report.headline is None
    assert "not yet measured" in (tmp_path / "scripted" / "report.md").read_text()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kto_from": "sft", "sft": None, "warm_start": None}, "give both an sft and a kto arm"),
        ({"controls": {"random": True}, "sft": None, "warm_start": None}, "add an sft arm"),
        ({"sft_from": "policy", "accumulate": False, "policy": "kto"}, "use policy: sft"),
        ({"controls": {"randum": True}}, "randum"),
    ],
)
def test_bad_arm_settings_are_refused(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recipe(tmp_path, **changes)


def test_comparing_a_model_that_was_never_evaluated_is_an_error(tmp_path: Path) -> None:
    from josh.loop.result import Evaluated, LoopResult

    result = LoopResult(run_dir=tmp_path)
    result.evaluated.append(Evaluated(label="round 1 JOSH-SFT", round=1, folder=tmp_path / "eval-sft"))
    with pytest.raises(ValueError, match="'round 1 JOSH-STF'"):
        result.compare("round 1 JOSH-STF", "round 1 JOSH-SFT", "typo")
    with pytest.raises(ValueError, match="'base'"):
        result.compare("round 1 JOSH-SFT", "base", "vs base")
    result.compare("round 1 JOSH-SFT", "base", "vs base", optional_baseline=True)  # baseline: false
    assert result.pairs == []


def test_an_arms_entry_may_not_stand_in_for_a_built_in_section(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sft has its own section"):
        recipe(tmp_path, arms={"sft": {"model": {"name": "base"}, "max_length": 512}})
