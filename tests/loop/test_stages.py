"""josh.loop.stages: the stage contract (settings, inputs, outputs, done, run) and how the context executes it, shown on
the merge stage with a merger that only records what it was asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from josh.loop.recipe import LoopRecipe
from josh.loop.stages import MergeStage, StageContext, Unfinished
from josh.loop.stages.manifest import read_manifest


class Merger:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, adapter: Path, out: Path, dtype: str) -> Path:
        self.calls += 1
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"weights": (adapter / "w").read_text(), "dtype": dtype}))
        return out


def context(tmp_path: Path, merger: Merger, dry: bool = False) -> StageContext:
    recipe = LoopRecipe.model_validate({"name": "run", "output_dir": str(tmp_path), "sft": {}})
    return StageContext(recipe, trainer=print, builder=print, merger=merger, console=Console(quiet=True), dry=dry)


def merge(ctx: StageContext, adapter: Path, dtype: str = "float32") -> MergeStage:
    return MergeStage(ctx, "merge", adapter, ctx.run_dir / "merged", dtype)


def test_a_stage_runs_once_for_the_same_settings_and_inputs(tmp_path: Path) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "w").write_text("1")
    merger = Merger()
    ctx = context(tmp_path, merger)
    stage = merge(ctx, adapter)
    ctx.execute(stage)
    ctx.execute(stage)
    assert merger.calls == 1 and ctx.result.ran == ["merge"] and ctx.result.skipped == ["merge"]
    assert stage.outputs() == [stage.folder / "config.json"] and read_manifest(stage.folder).config == stage.settings()
    (adapter / "w").write_text("2")  # a changed input reruns it, the old output set aside
    ctx.execute(stage)
    assert merger.calls == 2 and json.loads((stage.folder / "config.json").read_text())["weights"] == "2"
    assert len(list(ctx.run_dir.glob("merged.stale-*"))) == 1


def test_a_dry_context_runs_nothing_and_stops_at_the_first_unfinished_stage(tmp_path: Path) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "w").write_text("1")
    ctx = context(tmp_path, Merger())
    ctx.execute(merge(ctx, adapter))
    merger = Merger()
    dry = context(tmp_path, merger, dry=True)
    dry.execute(merge(dry, adapter))
    with pytest.raises(Unfinished, match="merge"):
        dry.execute(merge(dry, adapter, dtype="bfloat16"))  # other settings: not finished
    assert merger.calls == 0 and dry.result.skipped == ["merge"]


def test_a_run_recorded_before_a_settings_key_existed_still_counts_as_done(tmp_path: Path) -> None:
    """A train stage recorded by an earlier josh (no tree/grpo sections, no grpo.user_options, no optim.min_steps,
    josh's own names for the optim keys TRL names otherwise, no trl mappings) is the same stage."""
    from josh.loop.stages import TrainStage
    from josh.loop.stages.manifest import run_stage

    merger = Merger()
    ctx = context(tmp_path, merger)
    data = tmp_path / "rows.jsonl"
    data.write_text('{"messages": []}\n')
    stage = TrainStage(ctx, "train", ctx.run_dir / "train", ctx.recipe.sft, [data], "sft")
    oldest = [
        s for s in stage.earlier_settings() if "grpo" not in s["train"] and "min_steps" not in s["train"]["optim"]
    ]
    (before_sections,) = oldest
    now = stage.settings()["train"]
    names = {"num_train_epochs": "epochs", "per_device_train_batch_size": "per_device_batch_size"}
    names |= {"warmup_steps": "warmup", "lr_scheduler_type": "lr_scheduler", "use_liger_kernel": "liger_kernel"}
    optim = {names.get(k, k): v for k, v in now["optim"].items() if k != "min_steps"}
    sections = {m: {k: v for k, v in now[m].items() if k != "trl"} for m in ("sft", "kto", "dpo")}
    assert {**{k: v for k, v in now.items() if k not in ("tree", "grpo")}, "optim": optim, **sections} == (
        before_sections["train"]
    )
    assert optim["epochs"] == ctx.recipe.sft.optim.num_train_epochs
    work = lambda: stage.metrics.write_text("{}")  # noqa: E731
    assert run_stage("train", stage.folder, before_sections, stage.inputs(), work, log=lambda _: None)
    ctx.execute(stage)
    assert ctx.result.skipped == ["train"] and read_manifest(stage.folder).config == before_sections
