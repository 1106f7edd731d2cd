"""The ToolWOZ environment: MultiWOZ databases behind eight tools, with sparse goal rewards.

Constructor::

    ToolWOZEnv(db: str | Path | ToolWOZDB, tasks: Mapping[str, Sequence[Task]] | Callable[[str], Sequence[Task]]
               | None = None)

``db`` is a MultiWOZ ``db`` folder (``{restaurant,hotel,attraction,train}_db.json``) or an already loaded
``ToolWOZDB`` (share one between envs); ``tasks`` maps a split name to its tasks, or is a callable returning
them for a split. ``env.tasks("test")`` lists a split. A conversation is ``state = env.reset(task)`` followed by
``env.call(state, ToolCall(...))`` for each tool call; ``env.reward(state, messages)`` is completed / total goals.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from josh.core.env import ConversationState, EnvBase
from josh.envs.toolwoz.db import ToolWOZDB
from josh.envs.toolwoz.goals import TaskPlan, search_completes
from josh.envs.toolwoz.impossible import WRITE_TOOLS, impossible_reward
from josh.envs.toolwoz.policy import POLICY
from josh.envs.toolwoz.schema import Rejection, openai_tools, validate
from josh.envs.toolwoz.serving import FAILED_BOOKING, serve_booking, serve_search
from josh.envs.toolwoz.task import BOOK_SLOTS, derive_expected_failures, details_of
from josh.types import ErrorCategory, Goal, Message, Task, ToolCall, ToolResult

logger = logging.getLogger(__name__)

TaskSource = Mapping[str, Sequence[Task]] | Callable[[str], Sequence[Task]]

SYSTEM_PROMPT = (
    "You are a booking assistant for visitors to Cambridge, UK. You can look up restaurants, hotels, attractions "
    "and trains, and book tables, rooms and train tickets, using the tools provided. Each search returns at most "
    "one result, so pass every preference the customer has stated. Before booking, make sure you have all the "
    "details the booking needs (name or train ID, day, time, number of people or nights). Tell the customer the "
    "reference number of every successful booking."
)
_PLAN_CACHE_SIZE = 4096


class ToolWOZEnv(EnvBase):
    """ToolWOZ behind the ``Env`` protocol; the DB is shared read-only, so ``state.fork()`` is all a branch needs."""

    name = "toolwoz"
    write_tools = WRITE_TOOLS

    def __init__(self, db: str | Path | ToolWOZDB, tasks: TaskSource | None = None) -> None:
        self.db = db if isinstance(db, ToolWOZDB) else ToolWOZDB.load(db)
        self.tools: list[dict[str, Any]] = openai_tools()
        self._tasks = tasks
        self._plans: OrderedDict[int, tuple[Task, TaskPlan]] = OrderedDict()

    def tasks(self, split: str) -> list[Task]:
        """The tasks of one split; an unknown split is a ``ValueError`` naming the known ones."""
        if self._tasks is None:
            raise ValueError("this ToolWOZEnv was built without tasks; pass tasks= to list a split")
        if callable(self._tasks):
            return list(self._tasks(split))
        if split not in self._tasks:
            known = ", ".join(sorted(self._tasks)) or "none"
            raise ValueError(f"unknown ToolWOZ split {split!r}; known splits: {known}")
        return list(self._tasks[split])

    @property
    def splits(self) -> tuple[str, ...]:  # type: ignore[override]
        """The splits of the task source (a callable source: ``train`` and ``test``)."""
        return ("train", "test") if self._tasks is None or callable(self._tasks) else tuple(self._tasks)

    def system_prompt(self, task: Task) -> str:
        return SYSTEM_PROMPT

    def expected_failures(self, task: Task) -> list[Goal]:
        """The ``fail_info`` searches and ``fail_book`` bookings the task's user asks for before its goal."""
        return derive_expected_failures(details_of(task))

    @property
    def policy(self) -> str:
        """The written service policy of the domains (``josh.envs.toolwoz.policy``), for judging replies."""
        return POLICY

    def reset(self, task: Task) -> ConversationState:
        """A fresh state for ``task``; a task that is not a valid ToolWOZ task raises ``ValueError``."""
        if task.env != self.name:
            raise ValueError(f"task {task.id!r} belongs to env {task.env!r}, not {self.name!r}")
        self._plan(task)
        return ConversationState(task)

    def _plan(self, task: Task) -> TaskPlan:
        key = id(task)
        cached = self._plans.get(key)
        if cached is not None and cached[0] is task:
            self._plans.move_to_end(key)
            return cached[1]
        plan = TaskPlan.compile(task, self.db)
        self._plans[key] = (task, plan)
        if len(self._plans) > _PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan

    def step(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state``: its answer and the goals it completes (``EnvBase.call`` logs it and marks
        them). Never raises: a name or arguments of an unexpected type are a rejection, a crash a tool error."""
        name = getattr(call, "name", None)
        try:
            return self._run(state, name, getattr(call, "arguments", None))
        except Exception as exc:  # a bug or an unusable task must not end the rollout
            logger.exception("ToolWOZ call %r failed", name)
            message = f"The tool failed internally: {type(exc).__name__}: {exc}"
            content = json.dumps({"error": ErrorCategory.TOOL_ERROR.value, "message": message})
            return ToolResult(content=content, error=ErrorCategory.TOOL_ERROR)

    def _run(self, state: ConversationState, name: Any, arguments: Any) -> ToolResult:
        checked = validate(name, arguments)
        if isinstance(checked, Rejection):
            return ToolResult(content=checked.to_json(), error=checked.category)
        spec = checked.spec
        table = self.db.tables[spec.domain]
        plan = self._plan(state.task).domains[spec.domain]
        if spec.action == "search":
            served = serve_search(table, plan, checked.args)
            done = () if served.blocked else search_completes(plan, table, checked.args, served.row)
            row = None if served.row is None else dict(table.rows[served.row])
            content = served.content(table)
        elif spec.domain in BOOK_SLOTS:
            booked = serve_booking(plan, checked.args)
            done, row, content = tuple(goal.index for goal in booked.goals), None, booked.content
        else:
            done, row, content = (), None, FAILED_BOOKING
        return ToolResult(content=content, completed_goals=done, data=row)

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        """Completed goals / total goals (0.0 for a task without goals); an impossible task also needs an honest
        answer (``josh.envs.toolwoz.impossible``)."""
        if "impossible" in state.task.details:
            return impossible_reward(state, messages)
        return state.goal_reward
