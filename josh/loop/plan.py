"""``josh loop --plan``: the recipe resolved and checked as a run checks it, the components it would build, the
trainer's packages, and every stage it would run or skip (resume), each with at most what it costs; nothing runs.

A stage that has not run makes files later stages read (rows, adapters); the plan takes them to be there, so the
stages after it are listed as a run would reach them when each stage leaves something to train on.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from josh.loop.recipe import LoopRecipe
from josh.loop.runner import Loop
from josh.loop.seeds import seed_recipes
from josh.loop.stages import Planned
from josh.run.components import ComponentOptions
from josh.run.plan import Bound, plan_run
from josh.training.config import check_trainer_packages
from josh.util.plan import NOTHING_RUN, plan_table


def plan_stages(recipe: LoopRecipe) -> list[tuple[str, Planned]]:
    """Every stage of every seed, in order: (the seed's folder name, or '' for one seed; the stage)."""
    if recipe.seeds == 1:
        return [("", stage) for stage in Loop(recipe).plan()]
    return [(one.name, stage) for one in seed_recipes(recipe) for stage in Loop(one).plan()]


def print_loop_plan(recipe: LoopRecipe, console: Console | None = None) -> None:
    """Resolve and check ``recipe`` (what a run checks before its first stage), then print it, its components and
    its stages; raises what the run would raise."""
    console = console or Console()
    setup = recipe.setup.model_dump()
    resolved = plan_run(ComponentOptions(**setup, split=recipe.eval.split, limit=recipe.eval.limit))
    arms = [recipe.arm_recipe(key) for key in recipe.arm_keys] + [recipe.warm_kto]
    packages = check_trainer_packages(arm for arm in arms if arm is not None)
    stages = plan_stages(recipe)
    console.print(f"# {recipe.run_dir}/loop.yaml, as the run would write it", highlight=False)
    console.print(recipe.to_yaml(), highlight=False, markup=False)
    lines = resolved.lines()
    lines["tasks"] = (
        f"{resolved.tasks} of {recipe.eval.split}: every model evaluated on them, {recipe.eval.trials} trial(s)"
    )
    lines["trainer packages"] = ", ".join(packages)
    console.print(plan_table(f"josh loop --plan: {recipe.run_dir}", lines))
    console.print(_stage_table(recipe, stages))
    console.print(NOTHING_RUN, highlight=False)


def _stage_table(recipe: LoopRecipe, stages: list[tuple[str, Planned]]) -> Table:
    table = Table(title="stages, in order")
    for name in ("stage", "folder", "would", "LLM calls (at most)", "generated tokens (at most)"):
        table.add_column(name, overflow="fold", justify="right" if "(at most)" in name else "left")
    total = Bound()
    for seed, stage in stages:
        folder = (
            stage.folder.relative_to(recipe.run_dir) if stage.folder.is_relative_to(recipe.run_dir) else stage.folder
        )
        calls = f"{stage.bound.calls:,}" if stage.bound.calls else ""
        tokens = f"{stage.bound.tokens:,}" if stage.bound.tokens else ""
        table.add_row(f"{seed}: {stage.name}" if seed else stage.name, str(folder), "run" if stage.runs else "skip (done)",
                      calls, tokens)  # fmt: skip
        total += stage.bound
    runs = sum(stage.runs for _, stage in stages)
    table.add_section()
    table.add_row(f"{runs} of {len(stages)} stages run", "", "", f"{total.calls:,}", f"{total.tokens:,}")
    return table
