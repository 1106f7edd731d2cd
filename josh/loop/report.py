"""``report.json``: everything a loop measured, machine-readable, read from the stage folders a ``LoopResult``
points at. ``josh.loop.render`` renders it as ``report.md`` and terminal tables; ``josh.loop.pooling`` pools seeds.

Comparisons are paired per held-out task (a task's trials averaged), with a percentile bootstrap 95% interval over
tasks (``josh.eval.metrics.paired_difference``). Missing or unreadable files are left out, so a partial loop still
reports what it has.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from josh.eval.compare import ComparisonEntry, task_rewards
from josh.eval.metrics import Summary, bootstrap, paired_difference
from josh.eval.summary import fmt_interval
from josh.loop.costs import ArmCost, arm_costs
from josh.loop.result import RETRAIN, LoopResult, RoundRecord
from josh.loop.stages.manifest import read_manifest
from josh.util.layout import EXTRACT_STATS, MANIFEST, METRICS, REPORT_JSON, ROLLOUT_STATS, SUMMARY

START_DRAWS = "start, two training draws"


class ModelEntry(BaseModel):
    """One evaluated model: its metrics and its rewards per task (one value per trial; with ``train_seeds``, one per
    training seed, each that seed's mean over its trials, and the summary's average reward pooled over them)."""

    label: str
    arm: str
    round: int
    folder: str
    summary: Summary
    per_task: dict[str, list[float]] = Field(default_factory=dict)
    seed_rewards: list[float] = Field(default_factory=list, description="each training seed's average reward")


class HarvestEntry(BaseModel):
    """What one round's search harvested, and what it cost."""

    round: int
    policy: str
    trees: int = 0
    rewarded: int = 0
    success: int = 0
    accepted: int = 0
    trimmed: int = 0
    sft_rows: int = 0
    sft_tokens: int = 0
    kto_good: int = 0
    kto_bad: int = 0
    kto_tokens: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    search_wall_s: float = 0.0
    token_counter: str = "whitespace"
    control_rows: int | None = None
    control_tokens: int | None = None
    control_rewarded: int | None = Field(None, description="control-random rows whose branch met a goal")
    tree_rows: int | None = None
    tree_groups: int | None = None
    tree_zero_groups: int | None = None
    gate_replies: int | None = Field(None, description="ideal-path replies the judge gate looked at (extract.judge)")
    gate_removed: int | None = Field(None, description="turns that failed the judge gate")
    gate_to_kto: int | None = Field(None, description="failed turns added to KTO as undesirable (route: kto)")
    gate_failed: int | None = Field(None, description="judgements that failed (their turns were kept)")

    @property
    def rewarded_per_100_calls(self) -> float:
        return 100 * self.rewarded / self.llm_calls if self.llm_calls else 0.0


class TrainEntry(BaseModel):
    """One training run: rows it trained on, optimiser steps, tokens seen, final loss, wall time."""

    name: str
    rows: int = 0
    steps: int = 0
    tokens: int = 0
    loss: float | None = None
    wall_s: float = 0.0


class StageEntry(BaseModel):
    """One stage of the run, from its manifest: where it ran, how long, and how loaded the machine was."""

    name: str
    folder: str
    complete: bool
    wall_s: float | None = None
    load_start: list[float] | None = None
    load_end: list[float] | None = None


class NoteEntry(BaseModel):
    """An arm that ended without a model (round 0: before or across rounds)."""

    arm: str
    round: int
    message: str


class LoopReport(BaseModel):
    """``report.json`` of one seed."""

    kind: Literal["loop"] = "loop"
    title: str
    run_dir: str
    seed: int | None = None
    start: str | None = Field(None, description="the policy that ran the first search")
    headline: ComparisonEntry | None = None
    models: list[ModelEntry] = Field(default_factory=list)
    comparisons: list[ComparisonEntry] = Field(default_factory=list)
    harvest: list[HarvestEntry] = Field(default_factory=list)
    training: list[TrainEntry] = Field(default_factory=list)
    notes: list[NoteEntry] = Field(default_factory=list)
    costs: list[ArmCost] = Field(default_factory=list, description="LLM calls and tokens behind each model")
    stages: list[StageEntry] = Field(default_factory=list, description="every stage's wall time and load, in order")
    unfinished: str | None = Field(None, description="the first stage that has not finished, if any")

    def model(self, label: str) -> ModelEntry | None:
        """An evaluated model by label; ``START_DRAWS`` is the start policy pooled with control-retrain."""
        if label == START_DRAWS:
            return start_draws(self.models, self.headline.baseline) if self.headline is not None else None
        return next((m for m in self.models if m.label == label), None)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pool_draws(draws: list[dict[str, float]]) -> tuple[dict[str, list[float]], list[float]]:
    """Several draws of a model (each its reward per task): one reward per draw for each task every draw has, and
    each draw's mean over those tasks."""
    shared = sorted(set.intersection(*(set(d) for d in draws)))
    per_task = {t: [d[t] for d in draws] for t in shared}
    means = [sum(d[t] for t in shared) / len(shared) if shared else 0.0 for d in draws]
    return per_task, means


def pooled_task_rewards(folders: list[Path]) -> tuple[dict[str, list[float]], list[float]]:
    """One reward per evaluation folder for each task every folder finished (a folder's trials averaged), and each
    folder's mean over those tasks."""
    return pool_draws([{t: statistics.fmean(v) for t, v in task_rewards(f).items()} for f in folders])


def compare(after: ModelEntry, before: ModelEntry, role: str) -> ComparisonEntry:
    """``after`` minus ``before``, paired per task."""
    result = paired_difference(before.per_task, after.per_task)
    d = result.difference
    return ComparisonEntry(
        model=after.label, baseline=before.label, role=role, difference=d.mean, low=d.low, high=d.high,
        tasks=result.tasks, better=result.better, worse=result.worse,
    )  # fmt: skip


def _models(result: LoopResult) -> list[ModelEntry]:
    models = []
    for item in result.evaluated:
        data = _read_json(Path(item.folder) / SUMMARY)
        if data is None:
            continue
        summary, folder = Summary(**data), Path(item.folder)
        seeds = [f for f in item.seeds if (f / SUMMARY).is_file()]
        if seeds:
            per_task, seed_rewards = pooled_task_rewards([folder, *seeds])
            summary = summary.model_copy(update={"average_reward": bootstrap(list(per_task.values()))})
        else:
            per_task, seed_rewards = task_rewards(folder), []
        entry = ModelEntry(
            label=item.label, arm=item.arm, round=item.round, folder=str(folder), summary=summary, per_task=per_task,
            seed_rewards=seed_rewards,
        )  # fmt: skip
        models.append(entry)
    return models


def _draws(model: ModelEntry) -> list[dict[str, float]]:
    """A model's reward per task at each training seed it was evaluated at (its trials averaged)."""
    if model.seed_rewards:
        return [{t: v[k] for t, v in model.per_task.items()} for k in range(len(model.seed_rewards))]
    return [{t: statistics.fmean(v) for t, v in model.per_task.items()}]


def start_draws(models: list[ModelEntry], start: str) -> ModelEntry | None:
    """The start policy pooled with control-retrain, the same rows trained at another seed: per task, one reward per
    training draw, a steadier estimate of the start than either draw alone (None without both). Only its average
    reward is pooled; it is compared with, not listed among, the evaluated models."""
    first = next((m for m in models if m.label == start), None)
    second = next((m for m in models if m.label == RETRAIN), None)
    if first is None or second is None:
        return None
    per_task, seed_rewards = pool_draws(_draws(first) + _draws(second))
    summary = first.summary.model_copy(update={"average_reward": bootstrap(list(per_task.values()))})
    return ModelEntry(
        label=START_DRAWS, arm="start", round=0, folder=first.folder, summary=summary, per_task=per_task,
        seed_rewards=seed_rewards,
    )  # fmt: skip


def _harvest(record: RoundRecord) -> HarvestEntry:
    entry = HarvestEntry(round=record.round, policy=record.policy)
    rollout = _read_json(record.rollouts / ROLLOUT_STATS) or {}
    per_task = rollout.get("per_task", {})
    entry.trees = rollout.get("tasks", 0)
    entry.success = rollout.get("success", 0)
    entry.rewarded = sum(1 for t in per_task.values() if t.get("reward", 0) > 0)
    for key in ("llm_calls", "prompt_tokens", "completion_tokens"):
        setattr(entry, key, rollout.get(key, 0))
    entry.search_wall_s = rollout.get("session_wall_s", 0.0)
    extracted = _read_json(record.extract / EXTRACT_STATS) or {}
    tokens = extracted.get("tokens", {})
    entry.accepted, entry.trimmed = extracted.get("accepted", 0), extracted.get("trimmed", 0)
    entry.sft_rows, entry.sft_tokens = extracted.get("sft", 0), tokens.get("sft", 0)
    entry.kto_good, entry.kto_bad = extracted.get("kto_desirable", 0), extracted.get("kto_undesirable", 0)
    entry.kto_tokens = tokens.get("kto", 0)
    entry.token_counter = extracted.get("token_counter", "whitespace")
    gate = extracted.get("gate")
    if isinstance(gate, dict):
        entry.gate_replies, entry.gate_removed = gate.get("replies", 0), gate.get("removed", 0)
        entry.gate_to_kto, entry.gate_failed = gate.get("to_kto", 0), gate.get("failed", 0)
    control = _read_json(record.control / EXTRACT_STATS) if record.control is not None else None
    if control is not None:
        entry.control_rows, entry.control_tokens = control.get("sft", 0), control.get("tokens", {}).get("sft", 0)
        entry.control_rewarded = control.get("random_rewarded")
    tree = _read_json(record.tree / EXTRACT_STATS) if record.tree is not None else None
    if tree is not None:
        entry.tree_rows, entry.tree_groups = tree.get("tree_rows", 0), tree.get("tree_groups", 0)
        entry.tree_zero_groups = tree.get("tree_zero_groups", 0)
    return entry


def _training(result: LoopResult) -> list[TrainEntry]:
    out = []
    for name, folder in result.trained:
        data = _read_json(Path(folder) / METRICS)
        if data is not None:
            out.append(
                TrainEntry(
                    name=name,
                    rows=data.get("rows", 0),
                    steps=data.get("global_step", 0),
                    tokens=data.get("tokens") or 0,
                    loss=data.get("train_loss"),
                    wall_s=data.get("train_runtime_s", 0.0),
                )  # fmt: skip
            )
    return out


def _stages(run_dir: Path) -> list[StageEntry]:
    """The run's stages in the order they started (stale folders set aside are left out)."""
    found = []
    for path in run_dir.rglob(MANIFEST):
        manifest = read_manifest(path.parent)
        if manifest is None or any(".stale-" in part for part in path.relative_to(run_dir).parts):
            continue
        entry = StageEntry(
            name=manifest.stage, folder=str(path.parent.relative_to(run_dir)), complete=manifest.complete,
            wall_s=manifest.wall_s, load_start=manifest.load_start, load_end=manifest.load_end,
        )  # fmt: skip
        found.append((manifest.started_at, entry))
    return [entry for _, entry in sorted(found, key=lambda item: item[0])]


def build_report(result: LoopResult, *, title: str) -> LoopReport:
    """Read every file the result points at into a ``LoopReport``."""
    models = _models(result)
    by_label = {m.label: m for m in models}
    comparisons = [
        compare(by_label[p.model], by_label[p.baseline], p.role)
        for p in result.pairs
        if p.model in by_label and p.baseline in by_label
    ]
    final = result.headline
    pooled = start_draws(models, final.baseline) if final is not None and final.model in by_label else None
    if final is not None and pooled is not None:
        comparisons.append(compare(by_label[final.model], pooled, "vs the start's two draws"))
    headline = None
    if result.headline is not None:
        key = (result.headline.model, result.headline.baseline)
        headline = next((c for c in comparisons if (c.model, c.baseline) == key), None)
    return LoopReport(
        title=title,
        run_dir=str(result.run_dir),
        seed=result.seed,
        start=result.rounds[0].policy if result.rounds else None,
        headline=headline,
        models=models,
        comparisons=comparisons,
        harvest=[_harvest(r) for r in result.rounds],
        training=_training(result),
        notes=[NoteEntry(arm=n.arm, round=n.round, message=n.message) for n in result.notes],
        costs=arm_costs(result),
        stages=_stages(Path(result.run_dir)),
        unfinished=result.unfinished,
    )


def headline_text(report: LoopReport) -> str:
    """One line: JOSH's own increment over the policy that ran the first search, or why there is none."""
    c = report.headline
    if c is not None:
        return (
            f"JOSH increment ({c.model} minus {c.baseline}, the policy that ran the first search): "
            f"{fmt_interval(c.interval, signed=True)} average reward over {c.tasks} tasks "
            f"({c.better} better, {c.worse} worse)"
        )
    if report.unfinished:
        return f"JOSH increment: not yet measured (the loop stopped before {report.unfinished!r})"
    reasons = [n.message for n in report.notes if n.arm == "JOSH"]
    return f"JOSH increment: none ({reasons[0] if reasons else 'no JOSH model was evaluated'})"


def load_loop_report(path: Path) -> LoopReport:
    """A ``report.json`` of one seed (a file or its run folder)."""
    path = path / REPORT_JSON if path.is_dir() else path
    return LoopReport.model_validate_json(path.read_text(encoding="utf-8"))
