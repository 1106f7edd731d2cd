"""Independent seeds of a loop (``seeds: N`` / ``josh loop --seeds N``), the combined report across them, and
rebuilding a report from a run folder (``josh report``).

Seed ``k`` runs the recipe with ``seed`` + k (from 0 when unset) in ``<run>/seed-<seed>/``: its rollouts sample with
that seed and every training seed is shifted by it. The combined ``report.md`` / ``report.json`` in ``<run>/`` list
each seed's result and pool every comparison: per task, the difference averaged over the seeds, then a bootstrap
95% interval over tasks. A seed whose rounds trained no model of the policy arm counts as an increment of 0 on every
task (its policy did not change); a seed that has not finished is listed and left out of the pool.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field
from rich.console import Console

from josh.eval.metrics import bootstrap
from josh.loop.recipe import LoopRecipe, load_loop_recipe
from josh.loop.report import REPORT_JSON, ComparisonEntry, LoopReport, load_loop_report

SEEDS_FILE = "seeds.yaml"


class PooledEntry(BaseModel):
    """One comparison over seeds: each seed's mean difference, their spread, and the pooled per-task estimate."""

    model: str
    baseline: str
    role: str
    per_seed: list[float | None] = Field(default_factory=list, description="None: the seed lacks this pair")
    spread_sd: float = Field(0.0, description="standard deviation of the per-seed mean differences")
    sampling_sd: float = Field(
        0.0, description="the part of that spread that sampling the held-out tasks explains: the root mean square of "
        "each seed's standard error of its mean difference",
    )  # fmt: skip
    difference: float = 0.0
    low: float = 0.0
    high: float = 0.0
    tasks: int = 0
    better: int = 0
    worse: int = 0
    seeds: int = Field(0, description="seeds in the pool (an unfinished seed is left out)")
    above_zero: int = Field(0, description="seeds whose own interval lies above zero")
    below_zero: int = 0

    @computed_field
    @property
    def draw_sd(self) -> float:
        """The spread across seeds beyond task sampling: what the models' own draws (training seeds, the search's
        samples) add. More held-out tasks shrink ``sampling_sd`` only."""
        return math.sqrt(max(self.spread_sd**2 - self.sampling_sd**2, 0.0))


class SeedEntry(BaseModel):
    """One seed's run: its folder, headline and final rewards."""

    seed: int | None
    run_dir: str
    headline: ComparisonEntry | None = None
    headline_text: str = ""
    unfinished: str | None = None
    rewards: dict[str, float] = Field(default_factory=dict)


class SeedsReport(BaseModel):
    """The combined ``report.json`` of several seeds."""

    kind: Literal["seeds"] = "seeds"
    title: str
    run_dir: str
    runs: list[SeedEntry] = Field(default_factory=list)
    headline: PooledEntry | None = None
    comparisons: list[PooledEntry] = Field(default_factory=list)


def _diffs(report: LoopReport, model: str, baseline: str) -> dict[str, float] | None:
    after, before = report.model(model), report.model(baseline)
    if after is None or before is None:
        return None
    shared = sorted(after.per_task.keys() & before.per_task.keys())
    return {t: statistics.fmean(after.per_task[t]) - statistics.fmean(before.per_task[t]) for t in shared}


def headline_diffs(report: LoopReport) -> dict[str, float] | None:
    """Per-task JOSH increment of one seed: zeros when no JOSH model was trained, None when it cannot be told."""
    if report.headline is not None:
        return _diffs(report, report.headline.model, report.headline.baseline)
    start = report.model(report.start) if report.start else None
    if report.unfinished or start is None:
        return None
    return dict.fromkeys(start.per_task, 0.0)


def pool(
    per_seed: list[dict[str, float] | None], seed_entries: list[ComparisonEntry | None], key: tuple[str, str, str]
) -> PooledEntry:
    """Pool per-task differences over seeds (seeds with ``None`` are left out)."""
    by_task: dict[str, list[float]] = {}
    for diffs in per_seed:
        for task, d in (diffs or {}).items():
            by_task.setdefault(task, []).append(d)
    means = [statistics.fmean(v) for v in by_task.values()]
    seed_means = [statistics.fmean(d.values()) if d else None for d in per_seed]
    present = [m for m in seed_means if m is not None]
    squared_errors = [statistics.variance(d.values()) / len(d) for d in per_seed if d and len(d) > 1]
    iv = bootstrap([[m] for m in means])
    return PooledEntry(
        model=key[0], baseline=key[1], role=key[2], per_seed=seed_means,
        spread_sd=statistics.stdev(present) if len(present) > 1 else 0.0,
        sampling_sd=math.sqrt(statistics.fmean(squared_errors)) if squared_errors else 0.0,
        difference=iv.mean, low=iv.low, high=iv.high, tasks=len(means),
        better=sum(m > 0 for m in means), worse=sum(m < 0 for m in means), seeds=len(present),
        above_zero=sum(1 for e in seed_entries if e is not None and e.low > 0),
        below_zero=sum(1 for e in seed_entries if e is not None and e.high < 0),
    )  # fmt: skip


def pooled_headline(reports: list[LoopReport]) -> PooledEntry:
    """JOSH's increment over the policy that ran the first search, pooled over seeds."""
    return pool([headline_diffs(r) for r in reports], [r.headline for r in reports], ("JOSH", "start", "headline"))


def combine(reports: list[LoopReport], run_dir: Path, title: str) -> SeedsReport:
    """The combined report of several seeds' reports."""
    from josh.loop.render import headline_text

    runs = [
        SeedEntry(
            seed=r.seed,
            run_dir=str(Path(r.run_dir).name),
            headline=r.headline,
            headline_text=headline_text(r),
            unfinished=r.unfinished,
            rewards={m.label: m.summary.average_reward.mean for m in r.models},
        )  # fmt: skip
        for r in reports
    ]
    keys = list(dict.fromkeys((c.model, c.baseline, c.role) for r in reports for c in r.comparisons))
    pooled = []
    for key in keys:
        entries = [next((c for c in r.comparisons if (c.model, c.baseline) == key[:2]), None) for r in reports]
        diffs = [_diffs(r, *key[:2]) if e else None for r, e in zip(reports, entries, strict=True)]
        pooled.append(pool(diffs, entries, key))
    headline = pooled_headline(reports) if reports else None
    return SeedsReport(title=title, run_dir=str(run_dir), runs=runs, headline=headline, comparisons=pooled)


def increment_line(entry: PooledEntry) -> str:
    """``JOSH increment: +X.XXX [lo, hi] over N tasks; seeds excluding zero: K/M`` (K: intervals above zero, M: the
    seeds in the pool)."""
    return (
        f"JOSH increment: {entry.difference:+.3f} [{entry.low:+.3f}, {entry.high:+.3f}] over {entry.tasks} tasks; "
        f"seeds excluding zero: {entry.above_zero}/{entry.seeds}"
    )


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
    from josh.loop.runner import Loop

    console = console or Console()
    parent = recipe.run_dir
    if (parent / "loop.yaml").is_file():
        raise ValueError(f"{parent} holds a single-seed run; give the seeds another name (--set name=...)")
    parent.mkdir(parents=True, exist_ok=True)
    (parent / SEEDS_FILE).write_text(recipe.to_yaml(), encoding="utf-8")
    reports = []
    for i, one in enumerate(seed_recipes(recipe), start=1):
        console.rule(f"seed {one.seed} ({i} of {recipe.seeds}) -> {one.run_dir}")
        Loop(one, console=console, progress=progress, **injected).run()
        reports.append(load_loop_report(one.run_dir))
    return save_seeds(combine(reports, parent, f"josh loop: {recipe.name}, {recipe.seeds} seeds"), parent)


def save_seeds(report: SeedsReport, run_dir: Path) -> SeedsReport:
    """Write the combined ``report.json`` and ``report.md``."""
    from josh.loop.render import write_seeds_markdown

    (run_dir / REPORT_JSON).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    write_seeds_markdown(report, run_dir)
    return report


def rebuild(run_dir: Path) -> LoopReport | SeedsReport:
    """Rewrite a run folder's report from its finished stages (nothing runs), one seed or several."""
    from josh.loop.runner import Loop

    quiet = Console(quiet=True)
    if (run_dir / SEEDS_FILE).is_file():
        recipe = load_loop_recipe(run_dir / SEEDS_FILE).model_copy(
            update={"output_dir": run_dir.parent, "name": run_dir.name}
        )
        reports = []
        for one in seed_recipes(recipe):
            if (one.run_dir / "loop.yaml").is_file():
                Loop(one, console=quiet, progress=False, dry=True).run()
                reports.append(load_loop_report(one.run_dir))
        return save_seeds(combine(reports, run_dir, f"josh loop: {recipe.name}, {recipe.seeds} seeds"), run_dir)
    if not (run_dir / "loop.yaml").is_file():
        raise FileNotFoundError(f"{run_dir} holds no josh loop run (no loop.yaml or {SEEDS_FILE})")
    recipe = load_loop_recipe(run_dir / "loop.yaml").model_copy(
        update={"output_dir": run_dir.parent, "name": run_dir.name}
    )
    Loop(recipe, console=quiet, progress=False, dry=True).run()
    return load_loop_report(run_dir)


def load_any(path: Path) -> LoopReport | SeedsReport:
    """A ``report.json`` of either kind (a file or its run folder)."""
    import json

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
