"""Airline task records: ``tasks_test.json`` loaded into ``Task``s (see ``josh.envs.taubench.tasks``).

Every task is checked when the file loads: its user must be in ``users.json`` and each gold action must name a
known tool with arguments that fit its schema.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from josh.envs.airline.db import AirlineDataError, Record
from josh.envs.airline.tools import TOOLS, WRITE_TOOLS
from josh.envs.taubench.tasks import TauDetails, load_task_file
from josh.types import Task

SPLITS = ("test",)


def task_problem(details: TauDetails, users: dict[str, Record]) -> str | None:
    """Why a parsed task cannot run on this database (unknown user, unknown action, bad arguments), or ``None``."""
    if details.user_id not in users:
        return f"user id {details.user_id!r} is not in users.json"
    for index, action in enumerate(details.actions):
        tool = TOOLS.get(action.name)
        if tool is None:
            return f"action {index} is the unknown action {action.name!r}"
        if (problem := tool.check(action.kwargs)) is not None:
            return f"action {index} ({action.name}): {problem[0].removeprefix('Error: ')}"
    return None


def load_tasks(data_dir: Path | str, split: str, users: dict[str, Record]) -> list[Task]:
    """The tasks of one split (airline has only ``test``); ids are ``airline-<split>-<index>``."""
    if split not in SPLITS:
        raise AirlineDataError(f"unknown airline split {split!r}; τ-bench airline has only: {', '.join(SPLITS)}")
    check = partial(task_problem, users=users)
    return load_task_file("airline", data_dir, split, WRITE_TOOLS, AirlineDataError, check)
