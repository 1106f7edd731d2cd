"""The environment protocol every domain implements, and the forkable per-conversation state."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from josh.types import CallRecord, Message, Task, ToolCall, ToolResult


class ConversationState:
    """Per-branch state of one conversation: the task, the goals completed so far and the call log.

    ``fork()`` copies only the small per-branch parts (the completed set and the log list), never the database,
    so beam search can branch cheaply. Environments with mutable data subclass this and add a copy-on-write
    overlay.
    """

    __slots__ = ("task", "completed", "log", "terminated")

    def __init__(self, task: Task) -> None:
        self.task = task
        self.completed: set[int] = set()
        self.log: list[CallRecord] = []
        self.terminated = False

    def fork(self) -> ConversationState:
        child = object.__new__(type(self))
        child.task = self.task
        child.completed = set(self.completed)
        child.log = list(self.log)
        child.terminated = self.terminated
        return child

    @property
    def remaining(self) -> list[int]:
        return [i for i in range(len(self.task.goals)) if i not in self.completed]

    @property
    def goal_reward(self) -> float:
        """Completed goals / total goals; 0.0 for a task without goals."""
        total = len(self.task.goals)
        return len(self.completed) / total if total else 0.0


@runtime_checkable
class Env(Protocol):
    """A tool environment: ``reset`` a task into a state, then ``call`` tools on (a fork of) that state."""

    name: str
    tools: list[dict[str, Any]]

    def system_prompt(self, task: Task) -> str:
        """Domain text the agent gets (retail: the policy; ToolWOZ: a short role description)."""
        ...

    def reset(self, task: Task) -> ConversationState: ...

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state`` (mutating it); never raises on bad input."""
        ...

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        """The conversation's outcome reward once it is over."""
        ...

    def tasks(self, split: str) -> list[Task]: ...
