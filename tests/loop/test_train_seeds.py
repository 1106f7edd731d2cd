"""``train_seeds``: each SFT-recipe model of the scripted loop trained and evaluated at further training seeds, and
the report pooling their rewards per task."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from josh.loop.runner import TRAIN_SEED_STEP, Loop
from josh.loop.seeds import rebuild
from tests.fakes.loop import RecordingTrainer, builder, lines, merger, searching_builder
from tests.loop.plumbing import recipe  # a small held-out evaluation: no test here reads a score


def run_loop(tmp_path: Path, trainer: RecordingTrainer, searched: list[str] | None = None) -> Path:
    """The scripted loop at 3 training seeds with the random control; ``searched`` gets the models that searched."""

    changes = {"kto": None, "train_seeds": 3, "controls": {"random": True}}
    recording = builder if searched is None else searching_builder(searched)
    Loop(recipe(tmp_path, **changes), trainer=trainer, builder=recording, progress=False).run()
    return tmp_path / "scripted"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RecordingTrainer, list[str]]:
    """One run of ``run_loop`` for the module's tests (the first reads it, the second reads a copy it changes)."""
    tmp_path = tmp_path_factory.mktemp("train-seeds")
    trainer, searched = RecordingTrainer(), []
    run_loop(tmp_path, trainer, searched)
    return tmp_path, trainer, searched


def test_each_sft_model_is_trained_again_at_shifted_seeds_on_reshuffled_rows(
    seeded: tuple[Path, RecordingTrainer, list[str]],
) -> None:
    tmp_path, trainer, searched = seeded
    run_dir = tmp_path / "scripted"
    for train in ("round-0/warmstart/train", "round-1/train-sft", "round-1/control-random/train"):
        first = trainer.recipes[str(run_dir / train)]
        for k in (1, 2):
            again = trainer.recipes[str(run_dir / f"{train}-seed{k}")]
            assert again.seed == first.seed + k * TRAIN_SEED_STEP and again.optim == first.optim
            assert sorted(lines(Path(again.data))) == sorted(lines(Path(first.data)))
            evaluation = (run_dir / train).parent / ("eval-sft" if train.endswith("sft") else "eval")
            assert (evaluation.with_name(evaluation.name + f"-seed{k}") / "summary.json").is_file()
    assert set(searched) == {str(run_dir / "round-0" / "warmstart" / "train")}  # the first seed's model searches
    calls = len(trainer.calls)
    run_loop(tmp_path, trainer)
    assert len(trainer.calls) == calls  # a rerun finds every seed done


def test_the_report_pools_a_models_rewards_per_task_over_its_training_seeds(
    seeded: tuple[Path, RecordingTrainer, list[str]], tmp_path: Path
) -> None:
    run_dir = tmp_path / "scripted"
    shutil.copytree(seeded[0] / "scripted", run_dir)  # `josh report` rebuilds a moved run folder
    warm = run_dir / "round-0" / "warmstart"
    results = warm / "eval-seed1" / "results.jsonl"
    records = [json.loads(line) for line in lines(results)]
    results.write_text("".join(json.dumps({**r, "reward": 0.0}) + "\n" for r in records))  # seed 1 scores nothing

    report = rebuild(run_dir)
    first = {}
    for line in lines(warm / "eval" / "results.jsonl"):
        record = json.loads(line)
        first.setdefault(record["task_id"], []).append(record["reward"])
    entry = report.model("warm start")
    assert set(entry.per_task) == set(first)
    for task, rewards in first.items():
        assert entry.per_task[task][:2] == [pytest.approx(statistics.fmean(rewards)), 0.0]
    assert len(entry.seed_rewards) == 3 and entry.seed_rewards[1] == 0.0
    expected = statistics.fmean(statistics.fmean(v) for v in entry.per_task.values())
    assert entry.summary.average_reward.mean == pytest.approx(expected)
    assert entry.summary.average_reward.mean == pytest.approx(statistics.fmean(entry.seed_rewards))
    headline = report.headline
    josh = report.model(headline.model)
    diffs = [statistics.fmean(josh.per_task[t]) - statistics.fmean(entry.per_task[t]) for t in entry.per_task]
    assert headline.baseline == "warm start" and headline.difference == pytest.approx(statistics.fmean(diffs))
    markdown = (run_dir / "report.md").read_text()
    assert "warm start (3 training seeds: " in markdown and "pooled per task over its seeds" in markdown


def test_train_seeds_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train_seeds"):
        recipe(tmp_path, train_seeds=0)


def test_kto_on_sft_is_drawn_again_on_the_sft_model_of_the_same_training_seed(tmp_path: Path) -> None:
    trainer, searched = RecordingTrainer(), []

    changes = {"kto_from": "sft", "policy": "kto", "rounds": 2, "train_seeds": 2}
    Loop(
        recipe(tmp_path, **changes), trainer=trainer, builder=searching_builder(searched), merger=merger, progress=False
    ).run()
    run_dir = tmp_path / "scripted"
    for r in (1, 2):
        folder = run_dir / f"round-{r}"
        first, again = trainer.recipes[str(folder / "train-kto")], trainer.recipes[str(folder / "train-kto-seed1")]
        assert again.method == "kto" and again.seed == first.seed + TRAIN_SEED_STEP and again.optim == first.optim
        assert sorted(lines(Path(again.data))) == sorted(lines(Path(first.data)))
        assert again.model.name == str(folder / "merge-sft-seed1") and first.model.name == str(folder / "merge-sft")
        merged = json.loads((folder / "merge-sft-seed1" / "config.json").read_text())
        assert merged["merged_from"] == str(folder / "train-sft-seed1")
        assert (folder / "eval-kto-seed1" / "summary.json").is_file()
    assert searched[-1] == str(run_dir / "round-1" / "train-kto")  # the first draw searches the next round
    report = rebuild(run_dir)
    kto = report.model("round 2 JOSH-SFT+KTO")
    assert len(kto.seed_rewards) == 2 and report.headline.model == "round 2 JOSH-SFT+KTO"
    assert "round 2 JOSH-SFT+KTO (2 training seeds: " in (run_dir / "report.md").read_text()
    calls = len(trainer.calls)
    Loop(recipe(tmp_path, **changes), trainer=trainer, builder=builder, merger=merger, progress=False).run()
    assert len(trainer.calls) == calls  # a rerun finds every draw done
