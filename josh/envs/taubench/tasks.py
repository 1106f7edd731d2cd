"""τ-bench task records: ``tasks_<split>.json`` loaded into ``Task``s whose goals are the gold write actions.

Every task is checked when the file loads (its fields, and whatever the domain's ``check`` says about its user and
actions); a bad task stops the load with one error naming the file and the task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from josh.types import Goal, Task, ToolCall
from josh.util.jsonl import brief


class GoldAction(BaseModel):
    """One gold tool call of a task (``arguments`` is accepted for ``kwargs``, as in the legacy task files)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict, validation_alias=AliasChoices("kwargs", "arguments"))

    def to_call(self, index: int) -> ToolCall:
        return ToolCall(name=self.name, arguments=dict(self.kwargs), id=f"gold_{index}")


class TauDetails(BaseModel):
    """What ``Task.details`` holds for a τ-bench task."""

    user_id: str
    instruction: str
    actions: list[GoldAction] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)

    def gold_calls(self) -> list[ToolCall]:
        """The gold actions as tool calls (ids ``gold_0``, ``gold_1``, ...)."""
        return [action.to_call(i) for i, action in enumerate(self.actions)]


def details_of(task: Task) -> TauDetails:
    """The typed τ-bench details of a task."""
    return TauDetails.model_validate(task.details)


def make_task(env: str, task_id: str, details: TauDetails, writes: Collection[str], split: str | None = None) -> Task:
    """A ``Task`` of domain ``env``: one goal per gold action of a ``writes`` tool, in gold order."""
    goals = [Goal(name=a.name, parameters=dict(a.kwargs)) for a in details.actions if a.name in writes]
    return Task(
        id=task_id,
        env=env,
        split=split,
        user_goal=details.instruction,
        goals=goals,
        details=details.model_dump(),
    )


def load_task_file(
    env: str,
    data_dir: Path | str,
    split: str,
    writes: Collection[str],
    error: type[ValueError],
    check: Callable[[TauDetails], str | None] = lambda details: None,
) -> list[Task]:
    """The tasks of ``data_dir/tasks_<split>.json``, ids ``<env>-<split>-<index>``; any problem (unreadable file,
    no tasks, a malformed task, a task ``check`` rejects) raises ``error`` naming the file and the task."""
    path = Path(data_dir) / f"tasks_{split}.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}") from exc
    if not isinstance(rows, list):
        raise error(f"{path} must hold a JSON list of tasks")
    if not rows:
        raise error(f"{path}: split {split!r} holds no tasks")
    tasks = []
    for index, row in enumerate(rows):
        try:
            details = TauDetails.model_validate(row)
        except ValidationError as exc:
            raise error(f"{path}: task {index} is malformed: {brief(exc)}") from None
        if (problem := check(details)) is not None:
            raise error(f"{path}: task {index}: {problem}")
        tasks.append(make_task(env, f"{env}-{split}-{index}", details, writes, split))
    return tasks
