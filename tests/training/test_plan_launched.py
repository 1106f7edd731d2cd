"""``josh train --plan`` under ``accelerate launch``: every process checks the run, one prints the plan, and the
effective batch it prints counts the processes (per device x accumulation x processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["train", "kto", "--recipe", str(ROOT / "recipes/tiny-kto.yaml"), "--plan"]
ARGS += ["--data", str(ROOT / "tests/data/paper_kto_rows.jsonl"), "--set", "max_length=4096"]


@pytest.mark.parametrize(("rank", "printed"), [("0", True), ("1", False)])
def test_one_process_of_a_launch_prints_the_plan(rank: str, printed: bool, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    result = CliRunner().invoke(app, [*ARGS, "--output", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert ("effective batch" in result.output) is printed
    if printed:
        assert "x 2 process(es)" in result.output and "nothing was run or written" in result.output
    assert not (tmp_path / "run").exists()


def test_every_process_checks_the_run(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    result = CliRunner().invoke(app, [*ARGS, "--data", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "missing.jsonl" in result.output
