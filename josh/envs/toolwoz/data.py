"""One entry point for ToolWOZ data: ``load_toolwoz(source)`` gives the database folder and the tasks per split.

Sources, by name or path:
- ``mini`` (default): the invented set shipped in ``envs/toolwoz_mini/`` (package data in the wheel; regenerated
  into the user cache when neither copy is there);
- ``toolwoz``: the paper's release, installed into ``$JOSH_CACHE/toolwoz`` by ``josh data download toolwoz --source
  pypi`` (``josh.envs.toolwoz.paper_data``); the name wins over a folder of that name;
- a task-set folder: ``tasks_{split}.jsonl`` files and a database (what ``josh data mini`` / ``josh data download
  toolwoz`` write);
- a MultiWOZ folder: ``data.json``, the split lists and the database (``db/`` or ``*_db.json`` beside it);
- the ToolWOZ release: ``dataset.zip`` or its unpacked folder (``data.json``, ``delex.json``, ...).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from josh.envs.toolwoz.mini import write_mini
from josh.envs.toolwoz.multiwoz import DataFormatError, load_multiwoz
from josh.envs.toolwoz.paper_data import NAME, paper_source
from josh.envs.toolwoz.task import task_line
from josh.types import Task
from josh.util.atomic import write_atomic
from josh.util.bundled import CHECKOUT, bundled
from josh.util.cache import cache_dir
from josh.util.jsonl import CorruptLineError, bad_line, brief

ENV = "toolwoz"  # what a task file leaves out (``task_line``): every task in it plays ToolWOZ

SHIPPED_MINI = bundled("envs/toolwoz_mini") or CHECKOUT / "envs" / "toolwoz_mini"  # the checkout's or the wheel's copy
DB_DOMAINS = ("restaurant", "hotel", "attraction", "train")
SPLIT_ORDER = ("train", "val", "test", "full_test")


class BadTaskLine(DataFormatError, CorruptLineError):
    """A line of a task file that is not a task."""


class Splits(dict[str, list[Task]]):
    """Tasks by split name. Taking a split that holds no tasks (``splits[name]``) is a ``DataFormatError`` naming
    the file it came from, so a run never goes ahead on nothing; listing and counting splits works as for a dict."""

    def __init__(self, tasks: dict[str, list[Task]], sources: dict[str, Path]) -> None:
        super().__init__(tasks)
        self.sources = sources

    def __getitem__(self, name: str) -> list[Task]:
        tasks = super().__getitem__(name)
        if not tasks:
            raise DataFormatError(f"{self.sources.get(name, name)}: split {name!r} holds no tasks")
        return tasks


class ToolWOZData(NamedTuple):
    """A loaded source: the database folder and the tasks of each split."""

    db_dir: Path
    splits: Splits


def mini_dir() -> Path:
    """The shipped mini set, or a copy generated once into ``$JOSH_CACHE`` (default ``~/.cache/josh``)."""
    if (SHIPPED_MINI / "tasks_test.jsonl").is_file():
        return SHIPPED_MINI
    cached = cache_dir() / "toolwoz_mini"
    if not (cached / "tasks_test.jsonl").is_file():
        write_mini(cached)
    return cached


def find_db_dir(folder: Path) -> Path:
    """``folder/db`` or ``folder`` itself, whichever holds ``{domain}_db.json`` files."""
    for candidate in (folder / "db", folder):
        if any((candidate / f"{d}_db.json").is_file() for d in DB_DOMAINS):
            return candidate
    raise DataFormatError(f"{folder}: no database found (expected db/restaurant_db.json and the like)")


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bulk load: the hundred thousand small objects of the paper's
    task files would set off full collections that free nothing (1.5 s of a 1.8 s load)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_tasks(path: Path) -> list[Task]:
    """Tasks from a JSONL file, one ``Task`` per line (a ToolWOZ task file leaves ``env`` out); a bad line is one
    sentence naming the file, the line, the task id and what is wrong (skipped inside
    ``josh.util.jsonl.skipping_bad_lines``)."""
    tasks = []
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise DataFormatError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with _collection_paused():
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                task = _read_task(line)
            except ValidationError as exc:
                problem = _task_problem(line, exc)
            else:
                tasks.append(task)
                continue
            bad_line(path, number, problem, error=BadTaskLine)
    return tasks


def _read_task(line: bytes) -> Task:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return Task.model_validate_json(line)  # raises, with pydantic's wording of the JSON error
    return Task.model_validate({"env": ENV, **record} if isinstance(record, dict) else record)


def _task_problem(line: bytes, exc: ValidationError) -> str:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return f"is not valid JSON ({brief(exc).removeprefix('Invalid JSON: ')})"
    task_id = record.get("id") if isinstance(record, dict) else None
    return f"(task {task_id if isinstance(task_id, str) else '?'}) is not a valid task: {brief(exc)}"


def write_tasks(path: Path, tasks: list[Task]) -> None:
    """Write tasks as JSONL all at once, so a crash never leaves half a file."""
    write_atomic(path, (task_line(task) for task in tasks))


def _split_rank(name: str) -> tuple[int, str]:
    return (SPLIT_ORDER.index(name) if name in SPLIT_ORDER else len(SPLIT_ORDER), name)


def load_toolwoz(source: str | Path = "mini", *, db_dir: str | Path | None = None) -> ToolWOZData:
    """Load a ToolWOZ source (see the module docstring); ``db_dir`` overrides where the database is found."""
    named = {"mini": mini_dir, NAME: paper_source}.get(str(source))
    path = named() if named else Path(source)
    if not path.exists():
        raise DataFormatError(f"{source}: no such ToolWOZ source (use 'mini', 'toolwoz', a folder, or a dataset.zip)")
    folder = path if path.is_dir() else path.parent
    database = Path(db_dir) if db_dir else find_db_dir(folder)
    task_files = sorted(path.glob("tasks_*.jsonl")) if path.is_dir() else []
    if task_files:
        names = sorted((f.stem.removeprefix("tasks_") for f in task_files), key=_split_rank)
        sources = {name: path / f"tasks_{name}.jsonl" for name in names}
        splits = Splits({name: read_tasks(file) for name, file in sources.items()}, sources)
    else:
        loaded = load_multiwoz(path, db_dir=database)
        splits = Splits(loaded, dict.fromkeys(loaded, path))
    return ToolWOZData(database, splits)
