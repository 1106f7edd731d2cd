"""The environment contract: the ``Env`` protocol generic code relies on, ``EnvBase`` with the default of every
optional member, and the forkable per-conversation state whose per-branch fields the base forks."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

from josh.types import CallRecord, ErrorCategory, Goal, Message, Task, ToolCall, ToolResult


class ConversationState:
    """Per-branch state of one conversation: the task, the goals completed so far, the call log, whether a tool
    ended it (``terminated``) and how the run ended it (``ended``: ``None`` until the run sets it before the reward;
    τ² scores a conversation cut short as 0.0).

    ``holds_user``: the environment holds the user (an OpenEnv server), so the run asks the state's
    ``user_says_async`` (by default ``user_says`` inline) instead of the ``--user`` simulator; ``False`` by default.

    ``fork()`` shares the ``shared_fields`` (the task, a read-only or copy-on-write database) and copies each of the
    ``branch_fields`` shallowly, never the database, so beam search can branch cheaply. A subclass lists each of its
    ``__slots__`` in one of the two (checked when the class is defined, so a per-branch field is never shared by
    accident); it overrides ``fork`` only to copy deeper than one level (``OverlayState``'s per-table overlays).
    """

    __slots__ = ("task", "completed", "log", "terminated", "ended")
    shared_fields: ClassVar[tuple[str, ...]] = ("task",)
    branch_fields: ClassVar[tuple[str, ...]] = ("completed", "log", "terminated", "ended")
    holds_user: ClassVar[bool] = False

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

    def user_says(self, transcript: list[Message]) -> tuple[str, bool]:
        """What the user the environment holds answers ``transcript`` (nothing said yet: the opening), and whether
        the conversation is over; only a state with ``holds_user`` has one."""
        raise NotImplementedError(f"{type(self).__name__} holds no user (holds_user is False)")

    async def user_says_async(self, transcript: list[Message]) -> tuple[str, bool]:
        """``user_says`` from async code (a state whose user blocks on I/O runs it off the event loop)."""
        return self.user_says(transcript)

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
    """A tool environment: ``reset`` a task into a state, then ``call`` tools on (a fork of) that state. The members
    after ``tasks`` are optional: ``EnvBase`` gives each its default, and derives ``call`` from ``step``."""

    name: str
    tools: list[dict[str, Any]]

    def system_prompt(self, task: Task) -> str:
        """Domain text the agent gets (retail: the policy; ToolWOZ: a short role description)."""
        ...

    def reset(self, task: Task) -> ConversationState: ...

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state`` (mutating it: its goals completed, its log, its end); never raises on bad
        input."""
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
    blocking: bool

    def user_call(self, state: ConversationState, call: ToolCall) -> ToolResult: ...

    def expected_failures(self, task: Task) -> list[Goal]:
        """The calls ``task`` says fail by design (ToolWOZ: a search with the ``fail_info`` values the user asks
        for first); the diagnostics class a call that makes one an ``expected_failure``, not a wrong one."""
        ...


REQUIRED_MEMBERS = ("name", "tools", "system_prompt", "reset", "call", "reward", "tasks")
OPTIONAL_MEMBERS = ("splits", "outcome_reward", "policy", "goal_tools", "write_tools", "user_tools")
OPTIONAL_MEMBERS += ("reward_notes", "judge_call", "blocking", "user_call", "expected_failures")
ENV_MEMBERS = REQUIRED_MEMBERS + OPTIONAL_MEMBERS
IMPLEMENT = "subclass josh.core.env.EnvBase and implement name, tools, system_prompt, reset, step, reward and tasks"


async def call_tool(env: Env, state: ConversationState, call: ToolCall) -> ToolResult:
    """``env.call(state, call)`` from async code: on a worker thread where the environment is ``blocking`` (its calls
    block on I/O, e.g. an OpenEnv server), so the event loop goes on with other conversations meanwhile; inline
    otherwise (also for a stand-in that declares no ``blocking``, such as a test double)."""
    if getattr(env, "blocking", False):
        return await asyncio.to_thread(env.call, state, call)
    return env.call(state, call)


def missing_members(env: object) -> list[str]:
    """The ``Env`` members ``env`` lacks (an environment that does not subclass ``EnvBase`` may lack optional ones;
    one that does lacks ``step`` when it overrides neither ``step`` nor ``call``)."""
    missing = [name for name in ENV_MEMBERS if not hasattr(env, name)]
    kind = type(env)
    if isinstance(env, EnvBase) and kind.step is EnvBase.step and kind.call is EnvBase.call:
        missing.append("step")
    return missing


def record(state: ConversationState, call: ToolCall, result: ToolResult) -> ToolResult:
    """Note on ``state`` what ``result`` of ``call`` says: the goals it completed (those not completed before), the
    call in the log, and the end of the conversation where the result is ``terminal``. Returns ``result`` with only
    the newly completed goals. ``EnvBase.call`` does this after every ``step``; an environment that overrides
    ``call`` itself may call it too."""
    new = result.completed_goals
    if new and not state.completed.isdisjoint(new):
        new = tuple(i for i in new if i not in state.completed)
        result = replace(result, completed_goals=new)
    state.completed.update(new)
    if result.terminal:
        state.terminated = True
    name, arguments = getattr(call, "name", None), getattr(call, "arguments", None)
    state.log.append(
        CallRecord(
            name if isinstance(name, str) else repr(name),
            arguments if isinstance(arguments, (dict, str)) else repr(arguments),
            result.content,
            result.error,
            new,
        )
    )
    return result


class EnvBase:
    """The defaults of ``Env``'s optional members; an environment subclasses this, implements ``step`` and overrides
    what it has.

    ``step(state, call)`` runs the tool and says what happened in the ``ToolResult`` it returns (the goals the call
    completed, whether it ended the conversation); ``call`` runs ``step`` and derives the rest from that result
    (``record``: ``state.completed``, ``state.log``, ``state.terminated``), so an environment states each fact once.
    An environment whose goals are credited elsewhere too (an OpenEnv server also credits them on the user's
    messages) overrides ``call`` instead, and keeps the three in agreement itself (``josh check-env`` checks it).
    """

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
    blocking: bool = False
    """Calls block on I/O (a server): ``call_tool`` runs each on a worker thread, and a scripted agent that calls
    synchronously runs its turn on one, so other conversations go on meanwhile."""

    def step(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one tool call on ``state`` and say what it did: the text the agent sees, its error, the goals it
        completed, whether it ended the conversation (``terminal``); never raises on bad input."""
        raise NotImplementedError(f"{type(self).__name__} implements neither step(state, call) nor call(state, call)")

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """``step``, then the goals it completed, the log entry and the end noted on ``state`` (``record``)."""
        return record(state, call, self.step(state, call))

    def user_call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        """Run one of the ``user_tools`` for the user on ``state``; without user tools, a tool error. A user's call
        is not in ``state.log`` (the agent's calls)."""
        return ToolResult(content=f"Error: {self.name} has no user tools ({call.name})", error=ErrorCategory.TOOL_ERROR)

    def expected_failures(self, task: Task) -> list[Goal]:
        """The calls ``task`` says fail by design; none by default."""
        return []
