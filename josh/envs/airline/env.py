"""The τ-bench airline domain as a josh environment: 14 tools, the airline policy as the system prompt, JOSH goals
from the gold write actions, and τ-bench's outcome reward (final database equal to the gold replay's, required
outputs said). The decided semantics are in ``SPEC.md`` beside this file.

A goal completes when the agent makes the gold write with equal arguments, whatever the tool returns (as in the
JOSH reference); each call completes at most one goal.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from josh.envs.airline.db import AirlineDB, load_db
from josh.envs.airline.state import AirlineState
from josh.envs.airline.tasks import details_of, load_tasks
from josh.envs.airline.tools import TOOLS, WRITE_TOOLS
from josh.envs.retail.reward import RetailReward, outputs_found
from josh.envs.retail.state import canonical
from josh.types import CallRecord, ErrorCategory, Message, Task, ToolCall, ToolResult

DEFAULT_DATA_DIR = Path("envs/airline")
DATA_DIR_VARIABLE = "JOSH_AIRLINE_DATA"


def default_data_dir() -> Path:
    """``$JOSH_AIRLINE_DATA`` if set, else ``envs/airline`` (where ``josh data download airline`` puts it)."""
    return Path(os.environ.get(DATA_DIR_VARIABLE, DEFAULT_DATA_DIR))


class AirlineEnv:
    """τ-bench airline as a josh ``Env``. The database is loaded once per data folder and shared by all states."""

    name = "airline"
    goal_tools = write_tools = frozenset(WRITE_TOOLS)

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.db: AirlineDB = load_db(self.data_dir)
        self.tools: list[dict[str, Any]] = [tool.schema for tool in TOOLS.values()]
        self._tasks: dict[str, list[Task]] = {}
        self._gold_hashes: dict[tuple[str, str], str] = {}

    def system_prompt(self, task: Task) -> str:
        """The airline policy text (``policy.md`` of the data folder)."""
        return self.db.policy

    def reset(self, task: Task) -> AirlineState:
        if task.env != self.name:
            raise ValueError(f"task {task.id} belongs to env {task.env!r}, not {self.name!r}")
        return AirlineState(task, self.db)

    def call(self, state: AirlineState, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state``; bad calls come back as error results and change nothing."""
        if not isinstance(state, AirlineState):
            raise TypeError(f"AirlineEnv.call needs an AirlineState from AirlineEnv.reset, got {type(state).__name__}")
        live = not state.terminated
        content, error = self._execute(state, call)
        tool = TOOLS.get(call.name)
        completed = self._complete_goal(state, call) if live and tool is not None and tool.writes else ()
        terminal = tool is not None and tool.terminal and error is None
        if terminal:
            state.terminated = True
        state.log.append(
            CallRecord(
                name=call.name, arguments=call.arguments, content=content, error=error, completed_goals=completed
            )
        )
        return ToolResult(content=content, error=error, completed_goals=completed, terminal=terminal)

    def _execute(self, state: AirlineState, call: ToolCall) -> tuple[str, ErrorCategory | None]:
        tool = TOOLS.get(call.name)
        if tool is None:
            return f"Unknown action {call.name}", ErrorCategory.UNKNOWN_TOOL
        if not isinstance(call.arguments, dict):
            return f"Error: the arguments of {call.name} must be a JSON object", ErrorCategory.MALFORMED
        if state.terminated:
            return "Error: the conversation was already transferred to a human agent", ErrorCategory.TOOL_ERROR
        problem = tool.check(call.arguments)
        if problem is not None:
            return problem
        try:
            content = tool(state, call.arguments)
        except Exception as exc:  # a tool must never crash a rollout; report it like τ-bench does
            return f"Error: {exc}", ErrorCategory.TOOL_ERROR
        return content, ErrorCategory.TOOL_ERROR if content.startswith("Error:") else None

    @staticmethod
    def _complete_goal(state: AirlineState, call: ToolCall) -> tuple[int, ...]:
        """The first not-yet-completed goal equal to this call (same name and arguments), if any."""
        for index in state.remaining:
            goal = state.task.goals[index]
            if goal.name == call.name and goal.parameters == call.arguments:
                state.completed.add(index)
                return (index,)
        return ()

    def gold_state(self, task: Task) -> AirlineState:
        """A fresh state with the task's gold actions replayed (terminating tools skipped, as τ-bench does)."""
        state = self.reset(task)
        for call in details_of(task).gold_calls():
            if not TOOLS.get(call.name) or not TOOLS[call.name].terminal:
                self.call(state, call)
        return state

    def gold_hash(self, task: Task) -> str:
        """Hash of the gold final database (cached per task id and gold actions)."""
        key = (task.id, canonical(task.details.get("actions", [])))
        if key not in self._gold_hashes:
            self._gold_hashes[key] = self.gold_state(task).data_hash()
        return self._gold_hashes[key]

    def score(self, state: AirlineState, messages: list[Message]) -> RetailReward:
        """The full outcome reward record: database check, output check, and the reward."""
        data_hash, gold_hash = state.data_hash(), self.gold_hash(state.task)
        outputs = outputs_found(details_of(state.task).outputs, messages)
        success = data_hash == gold_hash and all(outputs.values())
        return RetailReward(
            reward=1.0 if success else 0.0,
            r_actions=data_hash == gold_hash,
            data_hash=data_hash,
            gold_hash=gold_hash,
            outputs=outputs,
        )

    def reward(self, state: AirlineState, messages: list[Message]) -> float:
        """1.0 when the final database equals the gold one and every required output was said, else 0.0."""
        return self.score(state, messages).reward

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``test``, the only airline split (loaded and checked once)."""
        if split not in self._tasks:
            self._tasks[split] = load_tasks(self.data_dir, split, self.db.users)
        return self._tasks[split]
