"""Human-readable views of evaluation summaries: a terminal table, and the Markdown report of a loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from josh.diagnostics import markdown_section
from josh.jsonl import iter_jsonl
from josh.metrics import Interval, PairedDifference, Summary, paired_difference


def fmt_interval(iv: Interval, *, signed: bool = False) -> str:
    """``mean [low, high]``; ``signed`` writes every number with its sign (for differences)."""
    f = "+.3f" if signed else ".3f"
    return f"{iv.mean:{f}} [{iv.low:{f}}, {iv.high:{f}}]"


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """(metric, value) pairs in reading order."""
    rows = [
        ("conversations", f"{summary.conversations} ({summary.tasks} tasks x {summary.trials} trials)"),
        ("average reward [95% CI]", fmt_interval(summary.average_reward)),
        ("100% success [95% CI]", fmt_interval(summary.success_rate)),
    ]
    rows += [(f"pass^{k}", f"{v:.3f}") for k, v in summary.pass_k.items()]
    rows += [
        ("conversations with malformed output", f"{summary.malformed_share:.1%}"),
        ("conversations with bad API use", f"{summary.bad_api_use_share:.1%}"),
        ("LLM calls", f"{summary.llm_calls:,}"),
        ("tokens (prompt + completion)", f"{summary.prompt_tokens:,} + {summary.completion_tokens:,}"),
        ("cost (USD)", f"{summary.cost:.4f}"),
        ("wall time", f"{summary.wall_s:.1f} s"),
    ]
    if summary.end_reasons:
        rows.append(("endings", ", ".join(f"{k} {v}" for k, v in sorted(summary.end_reasons.items()))))
    return rows


def print_summary(summary: Summary, *, title: str = "evaluation", console: Console | None = None) -> None:
    """A two-column table of the summary on the terminal."""
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    for name, value in summary_rows(summary):
        table.add_row(name, value)
    (console or Console()).print(table)


class ModelRow(BaseModel):
    """One evaluated model of a loop."""

    label: str
    round: int
    folder: str
    summary: Summary


class RolloutCost(BaseModel):
    """The search cost of one round's rollouts (from ``stats.json``)."""

    round: int
    tasks: int
    success: int
    mean_reward: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    task_s: float


class TrainCost(BaseModel):
    """One training run (from ``metrics.json``)."""

    name: str
    rows: int
    steps: int
    loss: float | None
    wall_s: float


class Comparison(BaseModel):
    """A model against the one it grew from, on the same tasks."""

    after: str
    before: str
    result: PairedDifference

    def describe(self) -> str:
        r = self.result
        return (
            f"{self.after} vs {self.before}: {fmt_interval(r.difference, signed=True)} average reward over "
            f"{r.tasks} tasks ({r.better} better, {r.worse} worse)"
        )


def task_rewards(folder: Path) -> dict[str, list[float]]:
    """Rewards per task id from an evaluation's ``results.jsonl``."""
    rewards: dict[str, list[float]] = {}
    for record in iter_jsonl(folder / "results.jsonl"):
        rewards.setdefault(str(record["task_id"]), []).append(float(record["reward"]))
    return rewards


def comparisons(models: list[ModelRow]) -> list[Comparison]:
    """Each model against the one it grew from (the last model of an earlier round; the first model for round-0
    models), and against the first model too when that is a different one."""
    rewards = {m.folder: task_rewards(Path(m.folder)) for m in models}
    out = []
    for i, model in enumerate(models[1:], start=1):
        earlier = [m for m in models[:i] if m.round < model.round]
        references = [earlier[-1] if earlier else models[0]]
        if references[0] is not models[0]:
            references.append(models[0])
        for ref in references:
            result = paired_difference(rewards[ref.folder], rewards[model.folder])
            out.append(Comparison(after=model.label, before=ref.label, result=result))
    return out


def comparison_table(items: list[Comparison]) -> list[str]:
    """Markdown rows of paired comparisons."""
    rows = []
    for c in items:
        r = c.result
        same = r.tasks - r.better - r.worse
        rows.append(
            [c.after, c.before, fmt_interval(r.difference, signed=True), str(r.better), str(r.worse), str(same)]
        )
    header = ["model", "compared with", "average reward difference [95% CI]", "tasks better", "worse", "same"]
    return _md_table(header, rows)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def collect(result: Any) -> tuple[list[ModelRow], list[RolloutCost], list[TrainCost]]:
    """Read the summaries, rollout statistics and training metrics a ``LoopResult`` points at (missing or
    unreadable files are left out, so a report of a partial loop still renders)."""
    models = []
    for item in result.evaluated:
        data = _read_json(Path(item.folder) / "summary.json")
        if data is not None:
            models.append(
                ModelRow(label=item.label, round=item.round, folder=str(item.folder), summary=Summary(**data))
            )
    rollouts = []
    for round_, folder in result.rollouts:
        data = _read_json(Path(folder) / "stats.json")
        if data is not None:
            fields = ("tasks", "success", "mean_reward", "llm_calls", "prompt_tokens", "completion_tokens")
            rollouts.append(
                RolloutCost(
                    round=round_,
                    wall_s=data.get("session_wall_s", 0.0),
                    task_s=data.get("search_wall_s", 0.0),
                    **{k: data.get(k, 0) for k in fields},
                )
            )
    trained = []
    for name, folder in result.trained:
        data = _read_json(Path(folder) / "metrics.json")
        if data is not None:
            trained.append(
                TrainCost(
                    name=name,
                    rows=data.get("rows", 0),
                    steps=data.get("global_step", 0),
                    loss=data.get("train_loss"),
                    wall_s=data.get("train_runtime_s", 0.0),
                )
            )
    return models, rollouts, trained


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def model_table(models: list[ModelRow]) -> list[str]:
    """Markdown rows: reward, success, pass^k, error shares and cost of every evaluated model."""
    ks = sorted({k for m in models for k in m.summary.pass_k})
    header = ["model", "round", "average reward [95% CI]", "100% success [95% CI]"]
    header += [f"pass^{k}" for k in ks] + ["malformed", "bad API use", "LLM calls", "tokens", "wall"]
    rows = []
    for m in models:
        s = m.summary
        rows.append(
            [m.label, str(m.round), fmt_interval(s.average_reward), fmt_interval(s.success_rate)]
            + [f"{s.pass_k.get(k, 0.0):.3f}" for k in ks]
            + [f"{s.malformed_share:.1%}", f"{s.bad_api_use_share:.1%}", f"{s.llm_calls:,}"]
            + [f"{s.prompt_tokens + s.completion_tokens:,}", f"{s.wall_s:.0f} s"]
        )
    return _md_table(header, rows)


def write_loop_report(result: Any, *, title: str = "josh loop") -> Path:
    """``<run>/report.md`` with the metrics of every evaluated model, the rollout and training costs, and PNG
    plots under ``<run>/plots/``."""
    from josh.plots import plot_errors, plot_reward, plot_rounds

    run_dir = Path(result.run_dir)
    models, rollouts, trained = collect(result)
    plots = run_dir / "plots"
    lines = [f"# {title}", ""]
    if models:
        first = models[0].summary
        lines += [
            f"Every model is evaluated on the same {first.tasks} held-out tasks x {first.trials} trial(s). Intervals "
            "are 95% percentile bootstrap intervals over tasks.",
            "",
            *model_table(models),
            "",
        ]
        figures = [
            ("Average reward and 100% success per model", plot_reward(models, plots / "reward.png")),
            ("Conversations with each error category, per model", plot_errors(models, plots / "errors.png")),
            ("Average reward per round", plot_rounds(models, plots / "rounds.png")),
        ]
        lines += [f"![{caption}](plots/{path.name})\n" for caption, path in figures if path is not None]
        paired = comparisons(models)
        if paired:
            lines += [
                "## Paired comparisons",
                "",
                "Per-task reward differences on the same held-out tasks, with 95% bootstrap intervals over tasks; an "
                "interval above zero supports an improvement.",
                "",
                *comparison_table(paired),
                "",
            ]
    lines += markdown_section([(m.label, m.summary.diagnostics) for m in models])
    if rollouts:
        lines += ["## Rollout cost", ""]
        lines += _md_table(
            ["round", "tasks", "reached 100%", "mean reward", "LLM calls", "prompt tokens", "completion tokens"]
            + ["wall (last session)", "search time summed over tasks"],
            [
                [str(r.round), str(r.tasks), str(r.success), f"{r.mean_reward:.3f}", f"{r.llm_calls:,}"]
                + [f"{r.prompt_tokens:,}", f"{r.completion_tokens:,}", f"{r.wall_s:.0f} s", f"{r.task_s:.0f} s"]
                for r in rollouts
            ],
        )
        lines.append("")
    if trained:
        lines += ["## Training", ""]
        lines += _md_table(
            ["run", "rows", "steps", "final loss", "wall"],
            [
                [t.name, str(t.rows), str(t.steps), "-" if t.loss is None else f"{t.loss:.4f}", f"{t.wall_s:.0f} s"]
                for t in trained
            ],
        )
        lines.append("")
    path = run_dir / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
