"""josh.stages: the stage contract (settings, inputs, outputs, done, run) and how the context executes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from josh.manifest import read_manifest
from josh.recipes import LoopRecipe
from josh.stages import StageContext, Unfinished
from josh.stages.base import Stage


class Count(Stage):
    """Writes the count of lines of its input file, times a factor (its setting)."""

    def __init__(self, ctx: StageContext, source: Path, factor: int) -> None:
        super().__init__(ctx, "count", ctx.run_dir / "count")
        self.source, self.factor, self.runs = source, factor, 0

    def settings(self) -> dict[str, Any]:
        return {"factor": self.factor}

    def inputs(self) -> dict[str, Any]:
        return {"source": self.source}

    def outputs(self) -> list[Path]:
        return [self.folder / "count.txt"]

    def run(self) -> None:
        self.runs += 1
        lines = len(self.source.read_text().splitlines())
        (self.folder / "count.txt").write_text(str(lines * self.factor))


def context(tmp_path: Path, dry: bool = False) -> StageContext:
    recipe = LoopRecipe.model_validate({"name": "run", "output_dir": str(tmp_path), "sft": {}})
    return StageContext(recipe, trainer=print, builder=print, merger=print, console=Console(quiet=True), dry=dry)


def test_a_stage_runs_once_for_the_same_settings_and_inputs(tmp_path: Path) -> None:
    source = tmp_path / "rows.txt"
    source.write_text("a\nb\n")
    ctx = context(tmp_path)
    stage = Count(ctx, source, 2)
    ctx.execute(stage)
    ctx.execute(stage)
    assert stage.runs == 1 and ctx.result.ran == ["count"] and ctx.result.skipped == ["count"]
    assert (stage.folder / "count.txt").read_text() == "4" and read_manifest(stage.folder).config == {"factor": 2}
    source.write_text("a\nb\nc\n")  # a changed input reruns it, the old output set aside
    ctx.execute(stage)
    assert stage.runs == 2 and (stage.folder / "count.txt").read_text() == "6"
    assert len(list(tmp_path.joinpath("run").glob("count.stale-*"))) == 1


def test_a_dry_context_runs_nothing_and_stops_at_the_first_unfinished_stage(tmp_path: Path) -> None:
    source = tmp_path / "rows.txt"
    source.write_text("a\n")
    context(tmp_path).execute(Count(context(tmp_path), source, 1))
    dry = context(tmp_path, dry=True)
    finished, changed = Count(dry, source, 1), Count(dry, source, 3)
    dry.execute(finished)
    with pytest.raises(Unfinished, match="count"):
        dry.execute(changed)
    assert finished.runs == changed.runs == 0 and dry.result.skipped == ["count"]
