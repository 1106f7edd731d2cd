"""Entry points of ``josh loop`` and ``josh demo``: load the recipe, run the loop (or each of its seeds), print
the report's tables with the JOSH increment.

The demo recipe ``recipes/demo-cpu.yaml`` is looked up in the working directory first, then in the source checkout
or the installed wheel (``josh.util.bundled``), so ``make demo`` and ``josh demo`` from any folder find it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from josh.llm.models import ModelNotFoundError
from josh.loop.plan import print_loop_plan
from josh.loop.recipe import load_loop_recipe
from josh.loop.render import print_loop_report, print_seeds_report
from josh.loop.report import load_loop_report
from josh.loop.runner import Loop
from josh.loop.seeds import run_seeds
from josh.training.data import DatasetError
from josh.training.model import TemplateError
from josh.training.recipe import RecipeError
from josh.util.bundled import recipe_file
from josh.util.quiet import noise_to

DEMO_RECIPE = Path("recipes") / "demo-cpu.yaml"


def demo_recipe() -> Path:
    """The demo recipe file (working directory first, then the checkout's or the wheel's copy)."""
    found = recipe_file(DEMO_RECIPE)
    if not found.is_file():
        raise FileNotFoundError(f"{DEMO_RECIPE} not found here, in a josh checkout or in the installed package")
    return found


def run_with_table(
    recipe_path: str, overrides: list[str], *, progress: bool = True, seeds: int | None = None, plan: bool = False
) -> None:
    """Load, run (or resume) and summarise a loop (every seed when ``seeds`` > 1), or (``plan``) print what it would
    run and run nothing; input problems become one red line and exit code 2. Library warnings and progress bars go
    to ``<run>/loop.log`` (a stage that logs to its own file takes them first)."""
    # Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning threads made CPU
    # generation several times slower (measured: 24 s vs 5 s for 32 tokens). Must be set before torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    console = Console()
    start = time.perf_counter()
    try:
        recipe = load_loop_recipe(recipe_path, [*overrides, *([f"seeds={seeds}"] if seeds is not None else [])])
        if plan:
            return print_loop_plan(recipe, console)
        with noise_to(recipe.run_dir / "loop.log"):  # the report tables go to stdout, the terminal
            if recipe.seeds > 1:
                print_seeds_report(run_seeds(recipe, console=console, progress=progress), console)
                stages = ""
            else:
                result = Loop(recipe, console=console, progress=progress).run()
                print_loop_report(load_loop_report(result.run_dir), console)
                stages = f"{len(result.ran)} stage(s) ran, {len(result.skipped)} skipped, "
    except (RecipeError, DatasetError, ModelNotFoundError, TemplateError, ValueError, OSError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    console.print(
        f"{stages}{time.perf_counter() - start:.0f} s; report: {recipe.run_dir / 'report.md'}", highlight=False
    )
