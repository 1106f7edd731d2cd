"""What the τ-bench-style domains (retail, airline) share: running a tool call on a copy-on-write state, JOSH goals
from the gold write actions, the gold replay and τ-bench's outcome reward.

A domain subclasses ``TauBenchEnv`` with the class keywords ``name``, ``registry`` (tool name ->
``josh.envs.taubench.tools.Tool``), ``state_type`` (an ``OverlayState``) and ``load_db`` (data folder -> database),
and defines ``load_tasks`` (split -> tasks); the data folder defaults to ``$JOSH_<NAME>_DATA``, else ``envs/<name>``.

Decisions: the database comparison keeps τ-bench's type sensitivity (``57`` and ``57.0`` differ), which is harmless
because both sides run the same tools and arguments are checked against the schemas. A goal completes when the
agent makes the gold write with equal arguments, whatever the tool returns (as in the JOSH reference), so gold
writes that fail on the data can still be matched; each call completes at most one goal.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from josh.core.env import ConversationState, EnvBase
from josh.envs.taubench.reward import OutcomeReward, outputs_found
from josh.envs.taubench.state import OverlayState, canonical
from josh.envs.taubench.tasks import details_of
from josh.envs.taubench.tools import Tool
from josh.types import ErrorCategory, Message, Task, ToolCall, ToolResult


def default_data_dir(name: str) -> Path:
    """``$JOSH_<NAME>_DATA`` if set, else ``envs/<name>`` (where ``josh data download <name>`` puts it)."""
    return Path(os.environ.get(f"JOSH_{name.upper()}_DATA", Path("envs") / name))


class TauBenchEnv(EnvBase, ABC):
    """The shared ``Env`` behaviour of the τ-bench domains (see the module docstring). The database is loaded once
    per data folder and shared by all states."""

    name: ClassVar[str]
    registry: ClassVar[Mapping[str, Tool]]
    state_type: ClassVar[type[OverlayState]]
    load_db: ClassVar[Callable[[Path], Any]]

    def __init_subclass__(
        cls,
        *,
        name: str,
        registry: Mapping[str, Tool],
        state_type: type[OverlayState],
        load_db: Callable[[Path], Any],
        **kwargs: Any,
    ) -> None:
        """Set the domain's class attributes from the class keywords (see the module docstring)."""
        super().__init_subclass__(**kwargs)
        cls.name, cls.registry, cls.state_type = name, registry, state_type
        cls.load_db = staticmethod(load_db)

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir(self.name)
        self.db = type(self).load_db(self.data_dir)
        self.tools: list[dict[str, Any]] = [tool.schema for tool in self.registry.values()]
        self.goal_tools = self.write_tools = frozenset(name for name, tool in self.registry.items() if tool.writes)
        self._tasks: dict[str, list[Task]] = {}
        self._gold_hashes: dict[tuple[str, str], str] = {}

    @abstractmethod
    def load_tasks(self, split: str) -> list[Task]:
        """Read and check the tasks of ``split`` from the data folder."""

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``split`` (loaded and checked once)."""
        if split not in self._tasks:
            self._tasks[split] = self.load_tasks(split)
        return self._tasks[split]

    def system_prompt(self, task: Task) -> str:
        """The domain policy (``policy.md`` of the data folder)."""
        return self.db.policy

    def reset(self, task: Task) -> Any:
        if task.env != self.name:
            raise ValueError(f"task {task.id} belongs to env {task.env!r}, not {self.name!r}")
        return self.state_type(task, self.db)

    def step(self, state: Any, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state``; bad calls come back as error results and change nothing."""
        if not isinstance(state, self.state_type):
            kind = self.state_type.__name__
            raise TypeError(f"{type(self).__name__}.call needs a {kind} from reset, got {type(state).__name__}")
        live = not state.terminated
        content, error = self._execute(state, call)
        tool = self.registry.get(call.name)
        completed = self._goal_met(state, call) if live and tool is not None and tool.writes else ()
        terminal = tool is not None and tool.terminal and error is None
        return ToolResult(content=content, error=error, completed_goals=completed, terminal=terminal)

    def _execute(self, state: Any, call: ToolCall) -> tuple[str, ErrorCategory | None]:
        tool = self.registry.get(call.name)
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
    def _goal_met(state: ConversationState, call: ToolCall) -> tuple[int, ...]:
        """The first not-yet-completed goal equal to this call (same name and arguments), if any."""
        for index in state.remaining:
            goal = state.task.goals[index]
            if goal.name == call.name and goal.parameters == call.arguments:
                return (index,)
        return ()

    def gold_state(self, task: Task) -> Any:
        """A fresh state with the task's gold actions replayed (terminating tools skipped, as τ-bench does)."""
        state = self.reset(task)
        for call in details_of(task).gold_calls():
            tool = self.registry.get(call.name)
            if tool is None or not tool.terminal:
                self.call(state, call)
        return state

    def gold_hash(self, task: Task) -> str:
        """Hash of the gold final database (cached per task id and gold actions)."""
        key = (task.id, canonical(task.details.get("actions", [])))
        if key not in self._gold_hashes:
            self._gold_hashes[key] = self.gold_state(task).data_hash()
        return self._gold_hashes[key]

    def score(self, state: Any, messages: list[Message]) -> OutcomeReward:
        """The full outcome reward record: database check, output check, and the reward."""
        data_hash, gold_hash = state.data_hash(), self.gold_hash(state.task)
        outputs = outputs_found(details_of(state.task).outputs, messages)
        success = data_hash == gold_hash and all(outputs.values())
        return OutcomeReward(
            reward=1.0 if success else 0.0,
            r_actions=data_hash == gold_hash,
            data_hash=data_hash,
            gold_hash=gold_hash,
            outputs=outputs,
        )

    def reward(self, state: Any, messages: list[Message]) -> float:
        """1.0 when the final database equals the gold one and every required output was said, else 0.0."""
        return self.score(state, messages).reward
