"""Paired comparison of finished evaluations (``josh compare``).

Each model is one or more evaluation folders (``results.jsonl``), for instance the same recipe trained at several
training seeds. A model's reward on a task is the mean over its evaluations of that evaluation's mean over trials;
only tasks every one of its evaluations finished count. Every model is then compared with the baseline (the first
model unless named): per-task difference, bootstrap 95% interval over the shared tasks, tasks better and worse.
Pooling seeds this way averages out training noise before the comparison instead of comparing one seed's luck.

Where every evaluation of two models was judged (``josh judge``, ``judgements.jsonl``) by the same judge under the
same prompt, each judge dimension is compared the same way: a task's score is the mean over its judged replies,
pooled over a model's evaluations, paired over the shared tasks. Models judged by different judges are not compared
on the judge's dimensions (a note says so).
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from josh.eval.judge.runner import by_judge, load_judgements, task_scores
from josh.eval.metrics import Interval, bootstrap, paired_difference
from josh.util.jsonl import iter_jsonl
from josh.util.layout import JUDGE_SUMMARY, RESULTS, SUMMARY

LABEL = re.compile(r"[A-Za-z0-9_.+-]+")
SETTINGS = ("env", "data", "split", "user")


class ComparisonEntry(BaseModel):
    """``model`` minus ``baseline`` in average reward, paired over the tasks both were evaluated on."""

    model: str
    baseline: str
    role: str
    dimension: str = "reward"
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
    """Rewards per task id from an evaluation folder's ``results.jsonl`` (or such a file itself): the latest record of
    each (task, trial), failed ones left out."""
    file = path if path.is_file() else path / RESULTS
    latest = {(str(r["task_id"]), r.get("trial", 0)): r for r in iter_jsonl(file)} if file.is_file() else {}
    rewards: dict[str, list[float]] = {}
    for (task_id, _), record in latest.items():
        if not record.get("failed"):  # a failed conversation is no result (josh.llm.health)
            rewards.setdefault(task_id, []).append(float(record["reward"]))
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
    judge: str | None = Field(
        None, description="the judge of all its evaluations (None: one is unjudged, or judges differ)"
    )
    judged: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="per judge dimension, the mean score per task over its evaluations"
    )


class CompareReport(BaseModel):
    """What ``josh compare`` prints (``--json`` prints this model)."""

    baseline: str
    models: list[ModelRewards]
    comparisons: list[ComparisonEntry]
    judged: list[ComparisonEntry] = Field(default_factory=list, description="judge dimensions, paired per task")
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


def folder_judge(path: str) -> str | None:
    """The judge named in an evaluation's ``judge_summary.json`` (None when it was not judged)."""
    try:
        judge = json.loads((results_path(path).parent / JUDGE_SUMMARY).read_text(encoding="utf-8")).get("judge")
    except (OSError, ValueError, AttributeError):
        return None
    return judge if isinstance(judge, str) else None


def judged_means(paths: list[str]) -> tuple[str | None, dict[str, dict[str, float]]]:
    """(judge, per dimension the mean score per task pooled over ``paths``), when one judge judged them all."""
    judges = {folder_judge(p) for p in paths}
    if len(judges) != 1 or None in judges:
        return None, {}
    [judge] = judges
    runs = [task_scores(by_judge(load_judgements(results_path(p).parent), judge)) for p in paths]
    out: dict[str, dict[str, float]] = {}
    for name in set.intersection(*(set(r) for r in runs)):
        shared = set.intersection(*(set(r[name]) for r in runs))
        out[name] = {t: statistics.fmean(statistics.fmean(r[name][t]) for r in runs) for t in sorted(shared)}
    return judge, out


def pooled(label: str, paths: list[str]) -> ModelRewards:
    """A model's per-task reward averaged over its evaluations, on the tasks all of them finished."""
    runs = [task_means(p) for p in paths]
    shared = set.intersection(*(set(r) for r in runs))
    every = set.union(*(set(r) for r in runs))
    if not shared:
        raise CompareError(f"{label}: its evaluations share no task; were they run on the same split?")
    per_task = {t: statistics.fmean(r[t] for r in runs) for t in sorted(shared)}
    judge, judged = judged_means(paths)
    return ModelRewards(
        label=label, evaluations=paths, tasks=len(per_task), reward=bootstrap([[v] for v in per_task.values()]),
        left_out=len(every - shared), per_task=per_task, judge=judge, judged=judged,
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


def compare_judged(after: ModelRewards, before: ModelRewards) -> tuple[list[ComparisonEntry], str | None]:
    """``after`` minus ``before`` on each judge dimension both have, and a note when they cannot be compared."""
    if after.judge is None and before.judge is None:
        return [], None
    if after.judge is None or before.judge is None:
        unjudged = after if after.judge is None else before
        return [], f"{unjudged.label}: not every evaluation judged by one judge; judge dimensions not compared"
    if after.judge != before.judge:
        return [], f"{after.label} and {before.label} were judged by different judges ({after.judge}, {before.judge})"
    out = []
    for name in sorted(after.judged.keys() & before.judged.keys()):
        before_tasks = {t: [v] for t, v in before.judged[name].items()}
        result = paired_difference(before_tasks, {t: [v] for t, v in after.judged[name].items()})
        if result.tasks:
            d = result.difference
            out.append(ComparisonEntry(
                model=after.label, baseline=before.label, role="vs baseline", dimension=name, difference=d.mean,
                low=d.low, high=d.high, tasks=result.tasks, better=result.better, worse=result.worse,
            ))  # fmt: skip
    return out, None


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
    judged: list[ComparisonEntry] = []
    for m in models:
        if m is not base:
            entries, note = compare_judged(m, base)
            judged += entries
            notes += [note] if note else []
    return CompareReport(baseline=base.label, models=models, comparisons=comparisons, judged=judged, notes=notes)


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
    if report.judged:
        judged = Table(title=f"judge scores (1-5) paired per task, minus {report.baseline}")
        for column in ("model", "dimension", "difference [95% CI]", "better / worse", "tasks"):
            judged.add_column(column, overflow="fold")
        for c in report.judged:
            judged.add_row(
                c.model, c.dimension, f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}]", f"{c.better} / {c.worse}",
                str(c.tasks),
            )  # fmt: skip
        console.print(judged)
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
