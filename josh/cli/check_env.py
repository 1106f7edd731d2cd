"""``josh check-env NAME``: ``josh.envs.checker`` on a built environment, as a table of checks and their times.
Registered on the app by ``josh.cli.main``."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperCommand

from josh.cli.options import json_summary, key_values, prints_json, registry
from josh.util.errors import reports_errors, skips_bad_lines

ENV_HELP = "the environment to check"


class CheckEnvCommand(TyperCommand):
    """``check-env`` with the registered environments (plugins included) named in its help."""

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        for param in self.params:
            if param.name == "name":
                param.help = f"{ENV_HELP}: {registry('env').describe()}"  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)


@reports_errors
@skips_bad_lines
@prints_json
def check_env(
    name: str = typer.Argument(..., help=ENV_HELP, show_default=False),
    data: str = typer.Option(
        "default", help="the environment's data source, as `josh eval --data`; default: its own (toolwoz: the mini set)"
    ),
    split: list[str] | None = typer.Option(None, help="a split to load and check on (repeatable; default: all)"),
    env_option: list[str] | None = typer.Option(None, help="an environment option KEY=VALUE (repeatable)"),
    tasks: int = typer.Option(2, min=1, help="tasks per split"),
    max_tasks: int = typer.Option(2, min=1, help="tasks in all, spread over the splits"),
    steps: int = typer.Option(24, min=1, help="random calls per fork tree"),
    seed: int = typer.Option(0, help="seed of the random calls"),
) -> None:
    """Check that an environment is fit for search: forks equal fresh replays, calls are deterministic and never
    raise, rewards lie in [0, 1], schemas and splits are valid."""
    from josh.envs.checker import check_env as run_checks  # heavy: the checker
    from josh.run.components import build_judged_env  # heavy: the run layer

    start = time.perf_counter()
    env = build_judged_env(name, data, key_values(env_option, "--env-option", "judge=openai:gpt-4.1"))
    built = time.perf_counter() - start
    report = run_checks(
        env, splits=split or None, tasks_per_split=tasks, max_tasks=max_tasks, steps=steps, seed=seed,
        raise_on_failure=False,
    )  # fmt: skip
    json_summary(report)
    table = Table(title=f"josh check-env {name}")
    for column in ("check", "result", "seconds", "detail"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for check in report.checks:
        verdict = "[green]pass[/green]" if check.passed else "[red]FAIL[/red]"
        table.add_row(check.name, verdict, f"{check.seconds:.2f}", check.detail)
    console = Console()
    console.print(table)
    total = time.perf_counter() - start
    console.print(f"built in {built:.2f} s; checked in {report.seconds:.2f} s; {total:.2f} s in all")
    if not report.passed:
        typer.secho(f"{name}: {sum(not c.passed for c in report.checks)} checks failed", fg="red", err=True)
        raise typer.Exit(1)
