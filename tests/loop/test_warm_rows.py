"""A warm start from rows made elsewhere (``warm_start.rows``, e.g. ``josh data import-paper``'s sft.jsonl) and KTO
on it (``warm_start.kto_rows`` with ``warm_kto``), on the scripted loop: no model, a stub trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from josh.loop.arms.warm_start import WARM_KTO
from josh.loop.runner import Loop
from josh.loop.stages.manifest import input_digest, read_manifest
from josh.util.jsonl import CorruptLineError, skipping_bad_lines
from tests.fakes.loop import RecordingTrainer, builder, merger
from tests.loop.plumbing import recipe  # a small held-out evaluation: no test here reads a score

KTO_ARM = {"model": {"name": "base"}, "max_length": 512, "method": "kto"}


def rows_files(tmp_path: Path, system: str = "the agent's prompt") -> tuple[Path, Path]:
    """Five SFT rows and six KTO rows (good and bad) in the layout import-paper writes."""
    sft, kto = tmp_path / "paper" / "sft.jsonl", tmp_path / "paper" / "kto.jsonl"
    sft.parent.mkdir()
    head = [{"role": "system", "content": system}, {"role": "user", "content": "a table for two"}]
    sft.write_text(
        "".join(
            json.dumps({"messages": [*head, {"role": "assistant", "content": f"reply {i}"}], "tools": []}) + "\n"
            for i in range(5)
        )
    )
    kto.write_text(
        "".join(
            json.dumps(
                {"prompt": head, "completion": [{"role": "assistant", "content": f"turn {i}"}], "label": i % 2 == 0}
            )
            + "\n"
            for i in range(6)
        )
    )
    return sft, kto


def run(tmp_path: Path, trainer: RecordingTrainer, **changes: Any):
    data = recipe(tmp_path, kto=None, **changes)
    return Loop(data, trainer=trainer, builder=builder, merger=merger, progress=False).run()


def test_warm_start_from_rows_then_kto_on_it_and_a_round_from_the_sft_policy(tmp_path: Path) -> None:
    sft, kto = rows_files(tmp_path)
    trainer = RecordingTrainer()
    warm = {"rows": str(sft), "limit": 3, "kto_rows": str(kto), "kto_limit": 4}
    result = run(tmp_path, trainer, warm_start=warm, warm_kto=KTO_ARM)
    run_dir = tmp_path / "scripted"
    assert [e.label for e in result.evaluated] == ["base", "warm start", WARM_KTO, "round 1 JOSH-SFT"]
    assert [(name, rows) for name, rows, _ in trainer.calls[:2]] == [("train", 3), ("train", 4)]  # the limits
    assert trainer.calls[2][0] == "train-sft" and trainer.calls[2][1] > 3  # the imported rows plus the ideal paths
    warm_dir = run_dir / "round-0" / "warmstart"
    copied = (warm_dir / "data" / "sft.jsonl").read_text().splitlines()
    assert copied == sft.read_text().splitlines()[:3]  # the run keeps the exact rows it trained on
    kto_recipe = trainer.recipes[str(run_dir / "round-0" / "warmstart-kto" / "train")]
    assert kto_recipe.method == "kto"
    assert kto_recipe.model.name == str(run_dir / "round-0" / "warmstart-kto" / "merge")  # KTO on the merged SFT
    merged = json.loads((run_dir / "round-0" / "warmstart-kto" / "merge" / "config.json").read_text())
    assert merged["merged_from"] == str(warm_dir / "train")
    search = read_manifest(run_dir / "round-1" / "rollouts")
    assert search.inputs["policy"] == input_digest(warm_dir / "train")  # the SFT warm start searches, not KTO
    report = (run_dir / "report.md").read_text()
    for pair in (f"| {WARM_KTO} | warm start |", "| warm start | base |", "| round 1 JOSH-SFT | warm start |"):
        assert pair in report, pair

    # a seeded draw: kto_limit rows at random, in file order, both labels in reach
    drawn = {**warm, "rows_seed": 0, "limit": None}
    run(tmp_path, RecordingTrainer(), warm_start=drawn, warm_kto=KTO_ARM)
    kept = (run_dir / "round-0" / "warmstart-kto" / "data" / "kto.jsonl").read_text().splitlines()
    lines = kto.read_text().splitlines()
    assert len(kept) == 4 and kept != lines[:4] and kept == [line for line in lines if line in kept]
    assert (warm_dir / "data" / "sft.jsonl").read_text().splitlines() == sft.read_text().splitlines()  # no limit

    # a changed rows file retrains what depends on it, and only that
    kto.write_text(kto.read_text().replace('"turn 0"', '"turn zero"'))
    again = RecordingTrainer()
    result = run(tmp_path, again, warm_start=drawn, warm_kto=KTO_ARM)
    assert [name for name, _, _ in again.calls] == ["train"]
    assert "warm-start KTO data" in result.ran and "warm-start data" in result.skipped


def test_rows_with_another_system_prompt_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sft, _ = rows_files(tmp_path, system="someone else's prompt")
    from rich.console import Console

    data = recipe(tmp_path, kto=None, warm_start={"rows": str(sft)}, rounds=1)
    Loop(data, trainer=RecordingTrainer(), builder=builder, merger=merger, console=Console(), progress=False).run()
    assert "5 of 5 rows open with another system prompt than the agent's" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"warm_kto": KTO_ARM}, "warm_kto trains on warm_start.kto_rows"),
        ({"warm_start": {"rows": "x.jsonl", "kto_rows": "k.jsonl"}}, "warm_kto trains on warm_start.kto_rows"),
        ({"warm_start": {"limit": 3}}, "give rows"),
        ({"warm_start": {"rows": "x", "kto_rows": "k"}, "warm_kto": {**KTO_ARM, "method": "sft"}}, "KTO recipe"),
        ({"warm_start": {"rows": "x", "kto_rows": "k"}, "warm_kto": {**KTO_ARM, "model": {"name": "other"}}}, "base"),
    ],
)
def test_bad_rows_settings_are_refused(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        recipe(tmp_path, kto=None, **changes)


def test_the_paper_cpu_recipe_loads() -> None:
    from josh.loop.recipe import load_loop_recipe

    root = Path(__file__).resolve().parents[2] / "recipes"
    paper = load_loop_recipe(root / "toolwoz-paper-cpu.yaml")
    assert paper.setup.data == "toolwoz" and paper.setup.agent == "react" and paper.baseline
    assert paper.warm_start.rows and paper.warm_start.kto_rows and paper.warm_start.rows_seed == 0
    assert paper.warm_kto.method == "kto" and paper.kto is None and paper.policy == "sft"
    assert paper.eval.limit == 30 and paper.eval.sampling.temperature == 0.0
    assert not paper.output_dir.is_absolute()


def test_a_scripted_warm_start_keeps_the_settings_older_runs_recorded(tmp_path: Path) -> None:
    from rich.console import Console

    from josh.loop.stages import StageContext, WarmStartStage

    data = recipe(tmp_path)
    ctx = StageContext(data, RecordingTrainer(), builder, merger, Console())
    settings = WarmStartStage(ctx, data.warm_start).settings()["warm_start"]
    assert not {"rows", "limit", "kto_rows", "kto_limit", "rows_seed"} & set(settings)  # the same digest as before


def test_a_bad_line_of_the_warm_start_rows_is_named_or_skipped_when_told(tmp_path: Path) -> None:
    sft, _ = rows_files(tmp_path)
    good = sft.read_text().splitlines()
    sft.write_text("\n".join([good[0], "{not json", *good[1:]]) + "\n")
    data = recipe(tmp_path, kto=None, warm_start={"rows": str(sft)}, rounds=1)
    with pytest.raises(CorruptLineError, match=rf"{sft}: line 2 is not valid JSON"):
        Loop(data, trainer=RecordingTrainer(), builder=builder, merger=merger, progress=False).run()
    with skipping_bad_lines() as skipped:  # josh loop --skip-bad-lines
        done = Loop(data, trainer=RecordingTrainer(), builder=builder, merger=merger, progress=False).run()
    assert list(skipped) == [(str(sft), 2)]
    assert (done.run_dir / "round-0" / "warmstart" / "data" / "sft.jsonl").read_text().splitlines() == good
