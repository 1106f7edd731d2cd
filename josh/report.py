"""Human-readable views of evaluation summaries: a terminal table and Markdown rows."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from josh.metrics import Interval, Summary


def fmt_interval(iv: Interval) -> str:
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


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
