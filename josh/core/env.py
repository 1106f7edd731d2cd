"""The environment contract: the ``Env`` protocol generic code relies on, ``EnvBase`` with the default of every
optional member, and the forkable per-conversation state whose per-branch fields the base forks."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

from josh.types import CallRecord, ErrorCategory, Goal, Message, Task, ToolCall, ToolResult


class ConversationState:
    """Per-branch state of one conversation: the task, the goals completed so far, the call log, whether a tool
    ended it (``terminated``) and how the run ended it (``ended``: ``None`` until the run sets it before the reward;
    τ² scores a conversation cut short as 0.0).

    ``fork()`` shares the ``shared_fields`` (the task, a read-only or copy-on-write database) and copies each of the
    ``branch_fields`` shallowly, never the database, so beam search can branch cheaply. A subclass lists each of its
    ``__slots__`` in one of the two (checked when the class is defined, so a per-branch field is never shared by
    accident); it overrides ``fork`` only to copy deeper than one level (``OverlayState``'s per-table overlays).
    """

    __slots__ = ("task", "completed", "log", "terminated", "ended")
    shared_fields: ClassVar[tuple[str, ...]] = ("task",)
    branch_fields: ClassVar[tuple[str, ...]] = ("completed", "log", "terminated", "ended")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a subclass whose fields are not declared as shared or per-branch (see the class docstring)."""
        super().__init_subclass__(**kwargs)
        if "__slots__" not in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} must declare __slots__ (and list each new field in branch_fields or shared_fields)"
            )
        declared = set(cls.shared_fields) | set(cls.branch_fields)
        slots = (cls.__slots__,) if isinstance(cls.__slots__, str) else tuple(cls.__slots__)
        if undeclared := [s for s in slots if s not in declared]:
            raise TypeError(
                f"{cls.__name__} adds {', '.join(undeclared)} without declaring it per-branch (branch_fields: the base "
                "fork copies it) or shared (shared_fields: every branch sees the same object)"
            )

    def __init__(self, task: Task) -> None:
        self.task = task
        self.completed: set[int] = set()
        self.log: list[CallRecord] = []
        self.terminated = False
        self.ended: str | None = None

    def fork(self) -> ConversationState:
        """A branch: the shared fields shared, each per-branch field a shallow copy."""
        child = object.__new__(type(self))
        for name in self.shared_fields:
            setattr(child, name, getattr(self, name))
        for name in self.branch_fields:
            setattr(child, name, copy.copy(getattr(self, name)))
        return child

    @property
    def remaining(self) -> list[int]:
        return [i for i in range(len(self.task.goals)) if i not in self.completed]

    @property
    def goal_reward(self) -> float:
        """Completed goals / total goals; 0.0 for a task without goals."""
        total = len(self.task.goals)
        return len(self.completed) / total if total else 0.0


JudgeCall = Callable[[list[Message]], str]


@runtime_checkable
class Env(Protocol):
    """A tool environment: ``reset`` a task into a state, then ``call`` tools on (a fork of) that state. The last
    ten members are optional: ``EnvBase`` gives each its default."""

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
        """The conversation's outcome reward in [0, 1] once it is over."""
        ...

    def tasks(self, split: str) -> list[Task]: ...

    splits: tuple[str, ...]
    outcome_reward: bool
    policy: str | None
    goal_tools: frozenset[str] | None
    write_tools: frozenset[str]
    user_tools: list[dict[str, Any]]
    reward_notes: Mapping[str, str]
    judge_call: JudgeCall | None

    def user_call(self, state: ConversationState, call: ToolCall) -> ToolResult: ...

    def expected_failures(self, task: Task) -> list[Goal]:
        """The calls ``task`` says fail by design (ToolWOZ: a search with the ``fail_info`` values the user asks
        for first); the diagnostics class a call that makes one an ``expected_failure``, not a wrong one."""
        ...


REQUIRED_MEMBERS = ("name", "tools", "system_prompt", "reset", "call", "reward", "tasks")
OPTIONAL_MEMBERS = ("splits", "outcome_reward", "policy", "goal_tools", "write_tools", "user_tools")
OPTIONAL_MEMBERS += ("reward_notes", "judge_call", "user_call", "expected_failures")
ENV_MEMBERS = REQUIRED_MEMBERS + OPTIONAL_MEMBERS


async def call_tool(env: Env, state: ConversationState, call: ToolCall) -> ToolResult:
    """``env.call(state, call)`` from async code: awaited through the environment's ``call_async`` where it has one
    (an environment whose calls block on I/O, e.g. an OpenEnv server, runs them off the event loop so other
    conversations go on meanwhile)."""
    call_async = getattr(env, "call_async", None)
    return await call_async(state, call) if call_async is not None else env.call(state, call)


def missing_members(env: object) -> list[str]:
    """The ``Env`` members ``env`` lacks (an environment that does not subclass ``EnvBase`` may lack optional ones)."""
    return [name for name in ENV_MEMBERS if not hasattr(env, name)]


class EnvBase:
    """The defaults of ``Env``'s optional members; an environment subclasses this and overrides what it has."""

    name: str
    tools: list[dict[str, Any]]
    splits: tuple[str, ...] = ("test",)
    """The split names ``tasks`` accepts (``josh check-env`` loads every one)."""
    outcome_reward: bool = False
    """Tasks without goal calls are searched by their final reward (``josh.search.algorithm``); else not searched."""
    policy: str | None = None
    """The written domain policy the judge holds replies to (``None``: that dimension is not judged)."""
    goal_tools: frozenset[str] | None = None
    """The tools that can complete goals (``None``: every tool can); the diagnostics read it."""
    write_tools: frozenset[str] = frozenset()
    """The tools whose success is a booking or a change (the diagnostics' false-success claims)."""
    user_tools: list[dict[str, Any]] = []  # noqa: RUF012 (read-only: an environment with user tools sets its own)
    """Tools of the user's own device (τ² telecom), in the agent's schema format; empty: the user has none."""
    reward_notes: Mapping[str, str] = MappingProxyType({})
    """How the final reward was scored, for the evaluation summary."""
    judge_call: JudgeCall | None = None
    """The LLM judge the run attaches when the environment has a ``judge`` option (``josh.run.env_judge``)."""

    def user_call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one of the ``user_tools`` for the user on ``state``; without user tools, a tool error."""
        return ToolResult(content=f"Error: {self.name} has no user tools ({call.name})", error=ErrorCategory.TOOL_ERROR)

    def expected_failures(self, task: Task) -> list[Goal]:
        """The calls ``task`` says fail by design; none by default."""
        return []
