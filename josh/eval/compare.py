"""Paired comparison of finished evaluations (``josh compare``).

Each model is one or more evaluation folders (``results.jsonl``), for instance the same recipe trained at several
training seeds. A model's reward on a task is the mean over its evaluations of that evaluation's mean over trials;
only tasks every one of its evaluations finished count. Every model is then compared with the baseline (the first
model unless named): per-task difference, bootstrap 95% interval over the shared tasks, tasks better and worse.
Pooling seeds this way averages out training noise before the comparison instead of comparing one seed's luck.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from josh.eval.metrics import Interval, bootstrap, paired_difference
from josh.util.jsonl import iter_jsonl
from josh.util.layout import RESULTS, SUMMARY

LABEL = re.compile(r"[A-Za-z0-9_.+-]+")
SETTINGS = ("env", "data", "split", "user")


class ComparisonEntry(BaseModel):
    """``model`` minus ``baseline`` in average reward, paired over the tasks both were evaluated on."""

    model: str
    baseline: str
    role: str
    difference: float
    low: float
    high: float
    tasks: int
    better: int
    worse: int

    @property
    def interval(self) -> Interval:
        return Interval(mean=self.difference, low=self.low, high=self.high)

    @property
    def above_zero(self) -> bool:
        return self.low > 0


def task_rewards(path: Path) -> dict[str, list[float]]:
    """Rewards per task id from an evaluation folder's ``results.jsonl`` (or such a file itself)."""
    file = path if path.is_file() else path / RESULTS
    rewards: dict[str, list[float]] = {}
    if file.is_file():
        for record in iter_jsonl(file):
            rewards.setdefault(str(record["task_id"]), []).append(float(record["reward"]))
    return rewards


class CompareError(ValueError):
    """A comparison that cannot be made: a missing evaluation, no shared task, a bad model spec."""


class ModelRewards(BaseModel):
    """One model: its evaluations and its reward pooled over them."""

    label: str
    evaluations: list[str]
    tasks: int
    reward: Interval
    left_out: int = Field(0, description="tasks missing from at least one of its evaluations")
    per_task: dict[str, float] = Field(default_factory=dict)


class CompareReport(BaseModel):
    """What ``josh compare`` prints (``--json`` prints this model)."""

    baseline: str
    models: list[ModelRewards]
    comparisons: list[ComparisonEntry]
    notes: list[str] = Field(default_factory=list)


def parse_spec(spec: str) -> tuple[str, list[str]]:
    """``LABEL=PATH[,PATH...]`` or ``PATH[,PATH...]`` (labelled by the spec itself) as (label, paths)."""
    label, sep, rest = spec.partition("=")
    if not sep or not LABEL.fullmatch(label) or Path(spec).exists():
        label, rest = spec, spec
    paths = [p for p in rest.split(",") if p]
    if not label or not paths:
        raise CompareError(f"{spec!r}: expected LABEL=EVAL_DIR[,EVAL_DIR...] or EVAL_DIR[,EVAL_DIR...]")
    return label, paths


def results_path(path: str) -> Path:
    """An evaluation folder's ``results.jsonl`` (or the file itself)."""
    p = Path(path)
    file = p / RESULTS if p.is_dir() else p
    if not file.is_file():
        raise CompareError(f"{path}: no {RESULTS} here; give a `josh eval --out` folder or a loop's eval stage folder")
    return file


def task_means(path: str) -> dict[str, float]:
    """Mean reward per task of one evaluation."""
    rewards = task_rewards(results_path(path))
    if not rewards:
        raise CompareError(f"{path}: {RESULTS} holds no finished conversation")
    return {task: statistics.fmean(values) for task, values in rewards.items()}


def pooled(label: str, paths: list[str]) -> ModelRewards:
    """A model's per-task reward averaged over its evaluations, on the tasks all of them finished."""
    runs = [task_means(p) for p in paths]
    shared = set.intersection(*(set(r) for r in runs))
    every = set.union(*(set(r) for r in runs))
    if not shared:
        raise CompareError(f"{label}: its evaluations share no task; were they run on the same split?")
    per_task = {t: statistics.fmean(r[t] for r in runs) for t in sorted(shared)}
    return ModelRewards(
        label=label, evaluations=paths, tasks=len(per_task), reward=bootstrap([[v] for v in per_task.values()]),
        left_out=len(every - shared), per_task=per_task,
    )  # fmt: skip


def compare_models(after: ModelRewards, before: ModelRewards) -> ComparisonEntry:
    """``after`` minus ``before`` on the tasks both have."""
    result = paired_difference(
        {t: [v] for t, v in before.per_task.items()}, {t: [v] for t, v in after.per_task.items()}
    )
    if result.tasks == 0:
        raise CompareError(f"{after.label} and {before.label} share no task; were they evaluated on the same split?")
    d = result.difference
    return ComparisonEntry(
        model=after.label, baseline=before.label, role="vs baseline", difference=d.mean, low=d.low, high=d.high,
        tasks=result.tasks, better=result.better, worse=result.worse,
    )  # fmt: skip


def settings_notes(paths: list[str]) -> list[str]:
    """Notes on evaluation settings (env, data, split, user from ``summary.json``) that differ between evaluations."""
    seen: dict[str, set[str]] = {key: set() for key in SETTINGS}
    notes = []
    for path in paths:
        summary = results_path(path).parent / SUMMARY
        try:
            run = json.loads(summary.read_text(encoding="utf-8")).get("run") or {}
        except (OSError, ValueError):
            notes.append(f"{path}: no readable {SUMMARY} (an evaluation still running?)")
            continue
        for key in SETTINGS:
            if run.get(key) is not None:  # a loop's evaluation stage leaves these to its recipe
                seen[key].add(str(run[key]))
    notes += [f"the evaluations differ in {key}: {', '.join(sorted(v))}" for key, v in seen.items() if len(v) > 1]
    return notes


def compare_evaluations(specs: list[str], baseline: str | None = None) -> CompareReport:
    """Pool each spec's evaluations and compare every model with the baseline (the first model by default)."""
    parsed = [parse_spec(s) for s in specs]
    labels = [label for label, _ in parsed]
    if len(parsed) < 2:
        raise CompareError("give at least two models to compare: BASELINE MODEL [MODEL...]")
    if len(set(labels)) < len(labels):
        raise CompareError(
            f"each model needs its own label; repeated: {sorted({x for x in labels if labels.count(x) > 1})}"
        )
    if baseline is not None and baseline not in labels:
        raise CompareError(f"--baseline {baseline!r} is none of the models: {', '.join(labels)}")
    models = [pooled(label, paths) for label, paths in parsed]
    base = next(m for m in models if m.label == (baseline or labels[0]))
    notes = settings_notes([p for _, paths in parsed for p in paths])
    notes += [
        f"{m.label}: {m.left_out} tasks not finished by all its evaluations are left out" for m in models if m.left_out
    ]
    comparisons = [compare_models(m, base) for m in models if m is not base]
    return CompareReport(baseline=base.label, models=models, comparisons=comparisons, notes=notes)


def print_compare(report: CompareReport, console: Console) -> None:
    """The models' rewards and each comparison with the baseline, as two tables and the notes."""
    rewards = Table(title="average reward per model (per task, mean over its evaluations)")
    rewards.add_column("model", overflow="fold")
    for column in ("evaluations", "tasks", "average reward [95% CI]"):
        rewards.add_column(column)
    for m in report.models:
        r = m.reward
        rewards.add_row(m.label, str(len(m.evaluations)), str(m.tasks), f"{r.mean:.3f} [{r.low:.3f}, {r.high:.3f}]")
    console.print(rewards)
    paired = Table(title=f"paired per task, minus {report.baseline}")
    paired.add_column("model", overflow="fold")
    for column in ("difference [95% CI]", "better / worse", "tasks"):
        paired.add_column(column)
    for c in report.comparisons:
        paired.add_row(
            c.model, f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}]", f"{c.better} / {c.worse}", str(c.tasks)
        )
    console.print(paired)
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
