"""``josh data``: download MultiWOZ/ToolWOZ, regenerate the mini set, generate tasks over a database, inspect a
source. Heavy modules are imported inside the commands so ``josh --help`` stays fast."""

from __future__ import annotations

import importlib
from collections import Counter
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from josh.cli.options import json_summary, prints_json
from josh.util.errors import report, reports_errors, skips_bad_lines

if TYPE_CHECKING:
    from josh.envs.toolwoz.data import ToolWOZData

data_app = typer.Typer(
    help="Data: download ToolWOZ/MultiWOZ or tau-bench retail/airline, the mini set, the goal generator, statistics.",
    no_args_is_help=True,
)
console = Console()
errors = Console(stderr=True, soft_wrap=True)


class Dataset(str, Enum):
    toolwoz = "toolwoz"
    multiwoz = "multiwoz"
    retail = "retail"
    airline = "airline"


class Source(str, Enum):
    auto = "auto"
    github = "github"
    pypi = "pypi"


DEFAULT_DEST = {
    Dataset.toolwoz: Path("envs/toolwoz"),
    Dataset.multiwoz: Path("envs/toolwoz"),
    Dataset.retail: Path("envs/retail"),
    Dataset.airline: Path("envs/airline"),
}


def _fail(exc: Exception) -> typer.Exit:
    """The failure's one line (with its fix, for a bad line of a file) and exit code 2."""
    return report(exc)


@data_app.command()
@reports_errors
def download(
    dataset: Dataset = typer.Argument(
        Dataset.toolwoz, help="toolwoz = multiwoz + converted task files; retail, airline = tau-bench domains"
    ),
    dest: Path | None = typer.Option(
        None, "--dest", help="folder to fill (default: envs/<dataset>; with --source pypi $JOSH_CACHE/toolwoz)"
    ),
    commit: str = typer.Option(
        "", "--commit", help="retail/airline only: tau-bench commit to fetch (default: the pinned one)"
    ),
    source: Source = typer.Option(
        Source.auto,
        "--source",
        help="toolwoz only: github = MultiWOZ 2.1 into envs/toolwoz; pypi = the paper's release from the package "
        "josh-train==0.1.4 into $JOSH_CACHE/toolwoz (the source --data toolwoz); auto = github, else pypi",
    ),
) -> None:
    """Fetch ToolWOZ / MultiWOZ 2.1 (github.com/budzianowski/multiwoz, or the paper's release in the package
    josh-train) or tau-bench retail / airline (github.com/sierra-research/tau-bench)."""
    if dataset in (Dataset.retail, Dataset.airline):
        _download_taubench(dataset.value, dest or DEFAULT_DEST[dataset], commit)
        return
    if source is not Source.auto and dataset is not Dataset.toolwoz:
        raise _fail(ValueError("--source is for toolwoz only"))
    # deferred: keeps josh --help light
    from josh.envs.toolwoz.download import (  # heavy: the ToolWOZ modules
        DownloadError,
        download_multiwoz,
        download_toolwoz,
    )
    from josh.envs.toolwoz.multiwoz import DataFormatError  # heavy: the ToolWOZ modules

    if source is not Source.pypi:
        run = download_toolwoz if dataset is Dataset.toolwoz else download_multiwoz
        target = dest or DEFAULT_DEST[dataset]
        try:
            counts = run(target)
        except (DownloadError, DataFormatError) as exc:
            if source is Source.github or dataset is not Dataset.toolwoz:
                raise _fail(exc) from exc
            errors.print(f"[yellow]GitHub failed ({exc}); falling back to the package index[/yellow]", markup=True)
        else:
            _print_counts(counts, target)
            return
    _install_paper(dest)


def _print_counts(counts: dict[str, int], source: Path | str) -> None:
    for name, count in counts.items():
        console.print(f"{name}: {count}")
    console.print(f"[green]ready:[/green] josh data stats {source}")


def _install_paper(dest: Path | None) -> None:
    """The paper's ToolWOZ from the package josh-train (``josh.envs.toolwoz.paper_data``)."""
    from josh.envs.toolwoz.multiwoz import DataFormatError  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.paper_data import install_paper_toolwoz, paper_dir  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.paper_package import PaperPackageError  # heavy: the ToolWOZ modules

    console.print(f"the paper's ToolWOZ into {dest or paper_dir()} (package josh-train==0.1.4, about 25 MB)")
    try:
        counts = install_paper_toolwoz(dest)
    except (PaperPackageError, DataFormatError) as exc:
        raise _fail(exc) from exc
    _print_counts(counts, dest or "toolwoz")


def _download_taubench(name: str, dest: Path, commit: str) -> None:
    """One τ-bench domain's files from the upstream repository (``josh.envs.<name>.download``)."""
    download = importlib.import_module(f"josh.envs.{name}.download")
    try:
        written = getattr(download, f"download_{name}")(dest, commit=commit or download.UPSTREAM_COMMIT)
    except download.DownloadError as exc:
        raise _fail(exc) from exc
    console.print(f"{len(written)} files written to {dest}; use it with --env {name} --data {dest}")


@data_app.command()
def mini(
    dest: Path = typer.Option(Path("envs/toolwoz_mini"), "--dest", help="folder to write"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Regenerate the mini ToolWOZ set (invented database + train/val/test tasks)."""
    from josh.envs.toolwoz.mini import write_mini  # heavy: the ToolWOZ modules

    counts = write_mini(dest, seed=seed)
    console.print(", ".join(f"{split}: {n}" for split, n in counts.items()) + f" tasks written to {dest}")


@data_app.command()
def generate(
    db: Path = typer.Option(..., "--db", help="folder with {restaurant,hotel,attraction,train}_db.json"),
    n: int = typer.Option(100, "--n", min=1),
    seed: int = typer.Option(0, "--seed"),
    out: Path = typer.Option(..., "--out", help="JSONL file to write, one task per line"),
    prefix: str = typer.Option("gen", "--prefix", help="task ids are PREFIX_0000, PREFIX_0001, ..."),
    impossible: float = typer.Option(
        0.0,
        "--impossible",
        min=0.0,
        max=1.0,
        help="share of impossible tasks (no such place, a value the "
        "database lacks, a booking that must fail): the agent must try, not book, and say so",
    ),
) -> None:
    """Generate tasks over any MultiWOZ-format database: valid ones, and with --impossible some that cannot be met."""
    from josh.envs.toolwoz.data import write_tasks  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.generator import generate as generate_tasks  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.generator import load_db  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.impossible import generate_with_impossible, summary_of  # heavy: the ToolWOZ modules

    try:
        if impossible > 0:
            tasks = generate_with_impossible(load_db(db), n, share=impossible, seed=seed, prefix=prefix)
        else:
            tasks = generate_tasks(db, n, seed=seed, prefix=prefix)
    except ValueError as exc:
        raise _fail(exc) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    write_tasks(out, tasks)
    kinds = ", ".join(f"{kind} {count}" for kind, count in summary_of(tasks).items() if count)
    console.print(f"{len(tasks)} tasks ({kinds}) written to {out}")


def _load(source: str) -> ToolWOZData:
    from josh.envs.toolwoz.data import load_toolwoz  # heavy: the ToolWOZ modules
    from josh.envs.toolwoz.multiwoz import DataFormatError  # heavy: the ToolWOZ modules

    try:
        return load_toolwoz(source)
    except DataFormatError as exc:
        raise _fail(exc) from exc


def stats_columns() -> tuple[str, ...]:
    """The columns of the ``josh data stats`` table, in order."""
    from josh.envs.toolwoz.task import DOMAINS  # heavy: the ToolWOZ modules

    return ("split", "tasks", "1-domain", "search", "book", "fail_info", "fail_book", *DOMAINS, "repaired", "defects")


@data_app.command()
@reports_errors
@skips_bad_lines
@prints_json
def stats(
    source: str = typer.Argument(
        "mini", help="'mini', 'toolwoz' (the paper's, once downloaded), a folder, or a dataset.zip"
    ),
    repairs: bool = typer.Option(
        False, "--repairs", help="also list every repaired task: its id, split and what was repaired per domain"
    ),
) -> None:
    """Tasks per split: single-domain tasks, search/book goals, fail cases, tasks per domain, goals repaired against
    the database and annotation defects (tasks nobody can complete; their ids are listed, and with --repairs those
    of the repaired tasks)."""
    from josh.envs.toolwoz.task import DOMAINS  # heavy: the ToolWOZ modules

    data = _load(source)
    table = Table(title=f"ToolWOZ source {source} (db: {data.db_dir})")
    columns = stats_columns()
    for column in columns:
        table.add_column(column, justify="right")
    defects: dict[str, str] = {}
    repaired: dict[str, dict[str, dict[str, str]]] = {}
    counts: dict[str, dict[str, int]] = {}
    for split, tasks in data.splits.items():
        domains = Counter(d for t in tasks for d in t.details.get("domains", []))
        names = Counter(g.name.split("_")[0] for t in tasks for g in t.goals)
        specs = [s for t in tasks for s in t.details.get("goal", {}).values()]
        row = (
            len(tasks),
            sum(len(t.details.get("domains", [])) == 1 for t in tasks),
            names["search"],
            names["book"],
            sum(bool(s.get("fail_info")) for s in specs),
            sum(bool(s.get("fail_book")) for s in specs),
            *(domains[d] for d in DOMAINS),
            sum(bool(t.details.get("repairs")) for t in tasks),
            sum(bool(t.details.get("defect")) for t in tasks),
        )
        table.add_row(split, *map(str, row))
        counts[split] = dict(zip(columns[1:], row, strict=True))
        defects.update((t.id, t.details["defect"]) for t in tasks if t.details.get("defect"))
        repaired[split] = {t.id: t.details["repairs"] for t in tasks if t.details.get("repairs")}
    summary = {"source": source, "db": str(data.db_dir), "splits": counts, "defects": defects}
    json_summary(summary | {"repairs": repaired} if repairs else summary)
    console.print(table)
    for task_id, why in defects.items():
        console.print(f"defect {task_id}: {why}")
    if repairs:
        for split, notes_by_task in repaired.items():
            for task_id, notes in notes_by_task.items():
                for domain, note in notes.items():
                    line = f"repaired {split} {task_id} {domain}: {note}"
                    console.print(line, markup=False, highlight=False, soft_wrap=True)


@data_app.command()
@reports_errors
@skips_bad_lines
def show(
    split: str = typer.Argument(..., help="train, val, test (or full_test for MultiWOZ sources)"),
    source: str = typer.Option("mini", "--source"),
    index: int = typer.Option(0, "--index", help="position in the split"),
    task_id: str | None = typer.Option(None, "--id", help="show this task instead of --index"),
) -> None:
    """Print one task: its goal text, goal calls and booked entities."""
    data = _load(source)
    if split not in data.splits:
        raise _fail(ValueError(f"no split {split!r}; this source has {', '.join(data.splits)}"))
    tasks = data.splits[split]
    chosen = next((t for t in tasks if t.id == task_id), None) if task_id else None
    if chosen is None and (task_id or not 0 <= index < len(tasks)):
        raise _fail(ValueError(f"no task {task_id or index} in {split} ({len(tasks)} tasks)"))
    task = chosen or tasks[index]
    console.print(f"[bold]{task.id}[/bold] ({task.split}, domains: {', '.join(task.details.get('domains', []))})")
    console.print(task.user_goal)
    for goal in task.goals:
        console.print(
            f"  goal {goal.name}({goal.parameters})" + (f" -> {goal.expected_return}" if goal.expected_return else "")
        )
    if task.transcript:
        console.print(f"  original transcript: {len(task.transcript)} turns")
