"""Independent seeds of a loop (``seeds: N`` / ``josh loop --seeds N``), the combined report across them, and
rebuilding a report from a run folder (``josh report``).

Seed ``k`` runs the recipe with ``seed`` + k (from 0 when unset) in ``<run>/seed-<seed>/``: its rollouts sample with
that seed and every training seed is shifted by it. The combined ``report.md`` / ``report.json`` in ``<run>/`` list
each seed's result and pool every comparison: per task, the difference averaged over the seeds, then a bootstrap
95% interval over tasks. A seed whose rounds trained no model of the policy arm counts as an increment of 0 on every
task (its policy did not change); a seed that has not finished is listed and left out of the pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from josh.loop.pooling import SeedsReport, combine
from josh.loop.recipe import LoopRecipe, load_loop_recipe
from josh.loop.render import write_seeds_markdown
from josh.loop.report import LoopReport, load_loop_report
from josh.loop.runner import Loop
from josh.util.atomic import write_atomic
from josh.util.layout import LOOP_RECIPE, REPORT_JSON
from josh.util.layout import SEEDS_RECIPE as SEEDS_FILE


def seed_recipes(recipe: LoopRecipe) -> list[LoopRecipe]:
    """One single-seed recipe per seed, each in ``<run>/seed-<seed>/``."""
    first = recipe.seed or 0
    parent = recipe.run_dir
    return [
        recipe.model_copy(update={"name": f"seed-{s}", "output_dir": parent, "seeds": 1, "seed": s})
        for s in range(first, first + recipe.seeds)
    ]


def run_seeds(
    recipe: LoopRecipe, *, console: Console | None = None, progress: bool = True, **injected: Any
) -> SeedsReport:
    """Run (or resume) every seed of ``recipe``, then write the combined report into its run folder. ``injected``
    goes to every ``Loop`` (trainer, builder, merger)."""
    console = console or Console()
    parent = recipe.run_dir
    if (parent / LOOP_RECIPE).is_file():
        raise ValueError(f"{parent} holds a single-seed run; give the seeds another name (--set name=...)")
    parent.mkdir(parents=True, exist_ok=True)
    write_atomic(parent / SEEDS_FILE, recipe.to_yaml())
    reports = []
    for i, one in enumerate(seed_recipes(recipe), start=1):
        console.rule(f"seed {one.seed} ({i} of {recipe.seeds}) -> {one.run_dir}")
        Loop(one, console=console, progress=progress, **injected).run()
        reports.append(load_loop_report(one.run_dir))
    return save_seeds(combine(reports, parent, f"josh loop: {recipe.name}, {recipe.seeds} seeds"), parent)


def save_seeds(report: SeedsReport, run_dir: Path) -> SeedsReport:
    """Write the combined ``report.json`` and ``report.md``."""
    write_atomic(run_dir / REPORT_JSON, report.model_dump_json(indent=2) + "\n")
    write_seeds_markdown(report, run_dir)
    return report


def rebuild(run_dir: Path) -> LoopReport | SeedsReport:
    """Rewrite a run folder's report from its finished stages (nothing runs), one seed or several."""
    quiet = Console(quiet=True)
    if (run_dir / SEEDS_FILE).is_file():
        recipe = load_loop_recipe(run_dir / SEEDS_FILE).model_copy(
            update={"output_dir": run_dir.parent, "name": run_dir.name}
        )
        reports = []
        for one in seed_recipes(recipe):
            if (one.run_dir / LOOP_RECIPE).is_file():
                Loop(one, console=quiet, progress=False, dry=True).run()
                reports.append(load_loop_report(one.run_dir))
        return save_seeds(combine(reports, run_dir, f"josh loop: {recipe.name}, {recipe.seeds} seeds"), run_dir)
    if not (run_dir / LOOP_RECIPE).is_file():
        raise FileNotFoundError(f"{run_dir} holds no josh loop run (no loop.yaml or {SEEDS_FILE})")
    recipe = load_loop_recipe(run_dir / LOOP_RECIPE).model_copy(
        update={"output_dir": run_dir.parent, "name": run_dir.name}
    )
    Loop(recipe, console=quiet, progress=False, dry=True).run()
    return load_loop_report(run_dir)


def load_any(path: Path) -> LoopReport | SeedsReport:
    """A ``report.json`` of either kind (a file or its run folder)."""
    path = path / REPORT_JSON if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"no {REPORT_JSON} at {path}: run `josh loop` or `josh report RUN_DIR` first")
    data = json.loads(path.read_text(encoding="utf-8"))
    return SeedsReport.model_validate(data) if data.get("kind") == "seeds" else LoopReport.model_validate(data)


def seed_reports(paths: list[Path]) -> list[LoopReport]:
    """Every seed's report under the given run folders (a combined report stands for its seeds)."""
    out: list[LoopReport] = []
    for path in paths:
        report = load_any(path)
        if isinstance(report, SeedsReport):
            folder = path if path.is_dir() else path.parent
            out += [load_loop_report(folder / run.run_dir) for run in report.runs]
        else:
            out.append(report)
    return out
