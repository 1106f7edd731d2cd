"""``josh loop --plan``: the recipe resolved and checked as a run checks it, the components it would build, the
trainer's packages, and every stage it would run or skip (resume), each with at most what it costs; nothing runs.

A stage that has not run makes files later stages read (rows, adapters); the plan takes them to be there, so the
stages after it are listed as a run would reach them when each stage leaves something to train on.
"""

from __future__ import annotations

import importlib.util

from rich.console import Console
from rich.table import Table

from josh.loop.recipe import LoopRecipe
from josh.loop.runner import Loop
from josh.loop.seeds import seed_recipes
from josh.loop.stages import Planned
from josh.run.components import ComponentOptions
from josh.run.plan import Bound, plan_run
from josh.util.plan import NOTHING_RUN


def trainer_packages(recipe: LoopRecipe) -> list[str]:
    """The packages the recipe's training stages import; ``ValueError`` naming the install when one is missing."""
    arms = [recipe.arm_recipe(key) for key in recipe.arm_keys] + [recipe.warm_kto]
    needed = ["trl", "peft", "accelerate"]
    if any(arm is not None and arm.quantization.load_in_4bit for arm in arms):
        needed.append("bitsandbytes")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"the recipe trains, which needs {', '.join(missing)}: pip install 'josh-agents[train]'")
    return needed


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
    packages = trainer_packages(recipe)
    stages = plan_stages(recipe)
    console.print(f"# {recipe.run_dir}/loop.yaml, as the run would write it", highlight=False)
    console.print(recipe.to_yaml(), highlight=False, markup=False)
    lines = {
        "environment": f"{resolved.env} (data {resolved.data})",
        "splits": ", ".join(f"{name} {size}" for name, size in resolved.splits.items()),
        "evaluation": f"{resolved.tasks} {recipe.eval.split} tasks x {recipe.eval.trials} trials per model",
        "agent": resolved.agent,
        "user": resolved.user,
        **{f"{role} LLM": loads for role, loads in resolved.llms.items()},
        "trainer packages": ", ".join(packages),
    }
    table = Table(title=f"josh loop --plan: {recipe.run_dir}", show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in lines.items():
        table.add_row(key, value)
    console.print(table)
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
