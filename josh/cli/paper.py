"""``josh data import-paper``: the authors' JOSH rollouts (josh-train 0.1.4) as trees and josh training rows."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from josh.util.errors import reported

console = Console()


def import_paper(
    archive: Path | None = typer.Option(
        None,
        "--archive",
        help="the josh-train 0.1.4 wheel, or the llama3-josh-toolwoz-for-KTO.zip inside it (default: the wheel in "
        "josh's cache, fetched from the package index and checked against its pinned sha256 on first use)",
    ),
    out: Path = typer.Option(..., "--out", help="a new (or empty) folder for trees.jsonl and the rows"),
    min_reward: float = typer.Option(
        1.0, min=0.0, max=1.0, help="skip trees below this reward (1.0: only the trees that reached 100%)"
    ),
    trim_at_failure: bool = typer.Option(
        False, help="keep an ideal path's turns before its first failed turn instead of skipping the tree"
    ),
) -> None:
    """Turn the paper's own JOSH rollouts into trees.jsonl (josh view) and the sft/kto/dpo rows josh extract writes."""
    from josh.harvest.extract import ExtractConfig  # heavy: the harvest stage
    from josh.harvest.paper_import import import_paper as run_import  # heavy: the harvest stage

    with reported():
        if archive is None:
            from josh.envs.toolwoz.paper_package import paper_wheel  # heavy: the ToolWOZ modules

            archive = paper_wheel()
        stats = run_import(archive, out, ExtractConfig(min_reward=min_reward, trim_at_failure=trim_at_failure))
    table = Table(title=f"the authors' JOSH rollouts -> {out}")
    table.add_column("count")
    table.add_column("value", justify="right")
    found, kept = stats.convert, stats.extract
    rows = [
        ("conversations", found.conversations),
        ("reached 100%", found.reached_100),
        ("tree nodes (agent turns)", found.nodes),
        ("outputs read differently by josh's ReACT parser", found.read_differently),
        ("trees used (min reward, no errors on the ideal path)", kept.accepted),
        ("SFT rows", kept.sft),
        ("KTO rows good", kept.kto_desirable),
        ("KTO rows bad", kept.kto_undesirable),
        ("DPO rows", kept.dpo),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
