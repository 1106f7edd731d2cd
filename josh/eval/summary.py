"""An evaluation summary as a terminal table, and the ``mean [low, high]`` form every table writes intervals in."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from josh.eval.metrics import Interval, Summary


def fmt_interval(iv: Interval, *, signed: bool = False) -> str:
    """``mean [low, high]``; ``signed`` writes every number with its sign (for differences)."""
    f = "+.3f" if signed else ".3f"
    mean, low, high = (round(x, 3) + 0.0 for x in (iv.mean, iv.low, iv.high))  # + 0.0: no "-0.000"
    return f"{mean:{f}} [{low:{f}}, {high:{f}}]"


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """(metric, value) pairs in reading order."""
    rows = [
        ("conversations", f"{summary.conversations} ({summary.tasks} tasks x {summary.trials} trials)"),
        ("average reward [95% CI]", fmt_interval(summary.average_reward)),
        ("100% success [95% CI]", fmt_interval(summary.success_rate)),
    ]
    if summary.failed:
        rows.insert(1, ("failed (LLM errors: not in the metrics, redone on rerun)", str(summary.failed)))
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
    rows += list(summary.reward_notes.items())
    return rows


def print_summary(summary: Summary, *, title: str = "evaluation", console: Console | None = None) -> None:
    """A two-column table of the summary on the terminal."""
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    for name, value in summary_rows(summary):
        table.add_row(name, value)
    (console or Console()).print(table)
