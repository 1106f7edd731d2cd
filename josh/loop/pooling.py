"""Several seeds' reports pooled into one (``SeedsReport``): each seed's result, and every comparison pooled per
task, the difference averaged over the seeds, then a bootstrap 95% interval over tasks. A seed whose rounds trained
no model of the policy arm counts as an increment of 0 on every task (its policy did not change); a seed that has
not finished is listed and left out of the pool."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from josh.eval.compare import ComparisonEntry
from josh.eval.metrics import bootstrap
from josh.loop.report import LoopReport, headline_text


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
