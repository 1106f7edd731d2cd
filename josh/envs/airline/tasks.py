"""Airline task records: loading ``tasks_test.json`` into ``Task``s whose goals are the gold write actions.

Every task is checked when the file loads: its user must be in ``users.json`` and each gold action must name a
known tool with arguments that fit its schema. A bad task stops the load with one error naming the file and the
task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from josh.envs.airline.db import AirlineDataError, Record
from josh.envs.airline.tools import TOOLS, WRITE_TOOLS
from josh.types import Goal, Task, ToolCall

SPLITS = ("test",)


class GoldAction(BaseModel):
    """One gold tool call of a task (``arguments`` is accepted for ``kwargs``, as in the legacy task file)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict, validation_alias=AliasChoices("kwargs", "arguments"))

    def to_call(self, index: int) -> ToolCall:
        return ToolCall(name=self.name, arguments=dict(self.kwargs), id=f"gold_{index}")


class AirlineDetails(BaseModel):
    """What ``Task.details`` holds for an airline task."""

    user_id: str
    instruction: str
    actions: list[GoldAction] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)

    def gold_calls(self) -> list[ToolCall]:
        """The gold actions as tool calls (ids ``gold_0``, ``gold_1``, ...)."""
        return [action.to_call(i) for i, action in enumerate(self.actions)]


def make_task(task_id: str, details: AirlineDetails, split: str | None = None) -> Task:
    """An airline ``Task``: one goal per gold write action, in gold order."""
    goals = [Goal(name=a.name, parameters=dict(a.kwargs)) for a in details.actions if a.name in WRITE_TOOLS]
    return Task(
        id=task_id,
        env="airline",
        split=split,
        user_goal=details.instruction,
        goals=goals,
        details=details.model_dump(),
    )


def details_of(task: Task) -> AirlineDetails:
    """The typed airline details of a task."""
    return AirlineDetails.model_validate(task.details)


def task_problem(details: AirlineDetails, users: dict[str, Record]) -> str | None:
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
    path = Path(data_dir) / f"tasks_{split}.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AirlineDataError(f"cannot read {path}: {exc}") from exc
    if not isinstance(rows, list):
        raise AirlineDataError(f"{path} must hold a JSON list of tasks")
    tasks = []
    for index, row in enumerate(rows):
        try:
            details = AirlineDetails.model_validate(row)
        except ValidationError as exc:
            raise AirlineDataError(f"{path}: task {index} is malformed: {exc}") from exc
        if (problem := task_problem(details, users)) is not None:
            raise AirlineDataError(f"{path}: task {index}: {problem}")
        tasks.append(make_task(f"airline-{split}-{index}", details, split))
    return tasks
