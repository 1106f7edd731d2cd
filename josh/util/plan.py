"""A plan printed (``--plan`` on ``eval``, ``rollout``, ``train`` and ``loop``): one two-column table of what the
command would do, then the line saying nothing ran."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.table import Table

PLAN_HELP = "check and resolve everything, print what would run and at most what it costs, and run nothing"
NOTHING_RUN = "plan only: nothing was run or written"


def plan_table(title: str, lines: Mapping[str, str]) -> Table:
    """The plan's lines as a two-column table titled ``title``."""
    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in lines.items():
        table.add_row(key, value)
    return table


def print_plan(title: str, lines: Mapping[str, str], console: Console | None = None) -> None:
    """The plan's lines as a table titled ``title``, then ``NOTHING_RUN``."""
    console = console or Console()
    console.print(plan_table(title, lines))
    console.print(NOTHING_RUN, highlight=False)
