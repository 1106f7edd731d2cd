"""Entry points of ``josh loop`` and ``josh demo``: load the recipe, run the loop, print the before/after table.

The demo recipe ``recipes/demo-cpu.yaml`` is looked up in the working directory first, then next to the package
(a source checkout), so ``make demo`` and ``josh demo`` from the repository root both find it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

DEMO_RECIPE = Path("recipes") / "demo-cpu.yaml"


def demo_recipe() -> Path:
    """The demo recipe file (working directory first, then the source checkout the package lives in)."""
    for candidate in (DEMO_RECIPE, Path(__file__).resolve().parents[1] / DEMO_RECIPE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{DEMO_RECIPE} not found: run the demo from the josh repository root")


def print_models(models: list, console: Console) -> None:
    """The terminal version of the report's model table."""
    from josh.report import fmt_interval

    table = Table(title="held-out evaluation (95% bootstrap intervals)")
    for column in ("model", "round", "average reward", "100% success", "LLM calls", "tokens", "wall"):
        table.add_column(column)
    for m in models:
        s = m.summary
        table.add_row(
            m.label, str(m.round), fmt_interval(s.average_reward), fmt_interval(s.success_rate),
            f"{s.llm_calls:,}", f"{s.prompt_tokens + s.completion_tokens:,}", f"{s.wall_s:.0f} s",
        )  # fmt: skip
    console.print(table)


def run_with_table(recipe_path: str, overrides: list[str], *, progress: bool = True) -> None:
    """Load, run (or resume) and summarise a loop; input problems become one red line and exit code 2."""
    # Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning threads made CPU
    # generation several times slower (measured: 24 s vs 5 s for 32 tokens). Must be set before torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from josh.llm.models import ModelNotFoundError
    from josh.loop import Loop
    from josh.recipes import RecipeError, load_loop_recipe
    from josh.report import collect, comparisons
    from josh.training.data import DatasetError
    from josh.training.model import TemplateError

    console = Console()
    start = time.perf_counter()
    try:
        recipe = load_loop_recipe(recipe_path, overrides)
        result = Loop(recipe, console=console, progress=progress).run()
    except (RecipeError, DatasetError, ModelNotFoundError, TemplateError, ValueError, OSError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    models, rollouts, _ = collect(result)
    print_models(models, console)
    for comparison in comparisons(models):
        console.print(comparison.describe(), highlight=False)
    for r in rollouts:
        console.print(
            f"round {r.round} rollouts: {r.tasks} tasks, {r.success} reached 100%, {r.llm_calls:,} LLM calls, "
            f"{r.prompt_tokens + r.completion_tokens:,} tokens",
            highlight=False,
        )
    console.print(
        f"{len(result.ran)} stage(s) ran, {len(result.skipped)} skipped, {time.perf_counter() - start:.0f} s; "
        f"report: {result.run_dir / 'report.md'}",
        highlight=False,
    )
