"""Retail task records: loading ``tasks_<split>.json`` into ``Task``s whose goals are the gold write actions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from josh.envs.retail.db import RetailDataError
from josh.envs.retail.tools import WRITE_TOOLS
from josh.jsonl import brief
from josh.types import Goal, Task, ToolCall

SPLITS = ("train", "dev", "test")


class GoldAction(BaseModel):
    """One gold tool call of a task."""

    model_config = ConfigDict(frozen=True)

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)

    def to_call(self, index: int) -> ToolCall:
        return ToolCall(name=self.name, arguments=dict(self.kwargs), id=f"gold_{index}")


class RetailDetails(BaseModel):
    """What ``Task.details`` holds for a retail task."""

    user_id: str
    instruction: str
    actions: list[GoldAction] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)

    def gold_calls(self) -> list[ToolCall]:
        """The gold actions as tool calls (ids ``gold_0``, ``gold_1``, ...)."""
        return [action.to_call(i) for i, action in enumerate(self.actions)]


def make_task(task_id: str, details: RetailDetails, split: str | None = None) -> Task:
    """A retail ``Task``: one goal per gold write action, in gold order."""
    goals = [Goal(name=a.name, parameters=dict(a.kwargs)) for a in details.actions if a.name in WRITE_TOOLS]
    return Task(
        id=task_id,
        env="retail",
        split=split,
        user_goal=details.instruction,
        goals=goals,
        details=details.model_dump(),
    )


def details_of(task: Task) -> RetailDetails:
    """The typed retail details of a task."""
    return RetailDetails.model_validate(task.details)


def load_tasks(data_dir: Path | str, split: str) -> list[Task]:
    """The tasks of one split (``train``, ``dev``, ``test``); ids are ``retail-<split>-<index>``."""
    if split not in SPLITS:
        raise RetailDataError(f"unknown retail split {split!r}; choose one of {', '.join(SPLITS)}")
    path = Path(data_dir) / f"tasks_{split}.json"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RetailDataError(f"cannot read {path}: {exc}") from exc
    if not isinstance(rows, list):
        raise RetailDataError(f"{path} must hold a JSON list of tasks")
    if not rows:
        raise RetailDataError(f"{path}: split {split!r} holds no tasks")
    tasks = []
    for index, row in enumerate(rows):
        try:
            details = RetailDetails.model_validate(row)
        except ValidationError as exc:
            raise RetailDataError(f"{path}: task {index} is malformed: {brief(exc)}") from None
        tasks.append(make_task(f"retail-{split}-{index}", details, split))
    return tasks
