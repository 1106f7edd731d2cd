"""Tiny protocol-conforming environments, agents and users every driver test shares.

``FakeEnv``: calling ``g<j>`` completes goal j. ``ToyEnv``: ``find`` / ``book`` complete goals 0 / 1, ``hang_up``
ends the conversation, ``explode`` raises. ``CallingAgent`` calls the next goal's tool each turn;
``CountingUser`` ends after a number of agent replies; ``Apologetic`` never calls a tool.

``TableAgent`` / ``TableUser`` are table-driven: a branch is named by its path of sibling indices (the root is
``()``, its second child ``(1,)``, that child's first child ``(1, 0)``). The agent writes the path into its reply
("reply 1.0"), so a later turn knows where it is and the table decides what each turn does; the expected search
tree is therefore known exactly."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState, EnvBase
from josh.core.user import UserTurn
from josh.types import CallRecord, ErrorCategory, Goal, Message, Task, ToolCall, ToolResult, assistant, tool_result

Path = tuple[int, ...]


TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object", "properties": {}}}}]


def make_task(n_goals: int = 2, task_id: str = "t0") -> Task:
    return Task(id=task_id, env="fake", goals=[Goal(name=f"g{i}") for i in range(n_goals)])


def make_tasks(n: int, goals: int = 1) -> list[Task]:
    return [make_task(goals, f"t{i:03d}") for i in range(n)]


class FakeEnv(EnvBase):
    """Calling the tool ``g<j>`` completes goal j; anything else is an unknown tool."""

    name = "fake"
    tools: list[dict] = []

    def system_prompt(self, task: Task) -> str:
        return "fake"

    def reset(self, task: Task) -> ConversationState:
        return ConversationState(task)

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        names = [g.name for g in state.task.goals]
        if call.name not in names:
            result = ToolResult(content="unknown", error=ErrorCategory.UNKNOWN_TOOL)
        else:
            idx = names.index(call.name)
            done = () if idx in state.completed else (idx,)
            state.completed.update(done)
            result = ToolResult(content=json.dumps({"ok": True}), completed_goals=done)
        state.log.append(
            CallRecord(name=call.name, arguments=call.arguments, content=result.content, error=result.error)
        )
        return result

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        return state.goal_reward

    def tasks(self, split: str) -> list[Task]:
        return make_tasks(3)


class ToyEnv(FakeEnv):
    """``find`` completes goal 0, ``book`` goal 1, ``hang_up`` ends the conversation, ``explode`` raises."""

    name = "toy"
    tools = [
        {"type": "function", "function": {"name": n, "description": f"the {n} tool", "parameters": {"properties": {}}}}
        for n in ("find", "book", "hang_up", "explode")
    ]

    def system_prompt(self, task: Task) -> str:
        return "You are a toy agent."

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        if call.name == "explode":
            raise RuntimeError("boom")
        index = {"find": 0, "book": 1}.get(call.name)
        if call.name == "hang_up":
            state.terminated = True
            result = ToolResult(content="bye", terminal=True)
        elif index is None:
            result = ToolResult(content=f"ERROR: no tool {call.name}", error=ErrorCategory.UNKNOWN_TOOL)
        else:
            new = () if index in state.completed else (index,)
            state.completed.update(new)
            result = ToolResult(content=json.dumps({"ok": call.name}), completed_goals=new)
        state.log.append(CallRecord(name=call.name, arguments=call.arguments, content=result.content))
        return result


class CallingAgent:
    """Each turn calls the next uncompleted goal's tool unless the task id is in ``fail``; then speaks."""

    def __init__(self, fail: set[str] = frozenset(), raise_on: set[str] = frozenset()) -> None:
        self.env = FakeEnv()
        self.fail = fail
        self.raise_on = raise_on

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame(tools=self.env.tools)

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        if state.task.id in self.raise_on:
            raise RuntimeError("agent exploded")
        turns = []
        for _ in range(n):
            fork = state.fork()
            name = "nope" if state.task.id in self.fail or not fork.remaining else f"g{fork.remaining[0]}"
            call = ToolCall(name=name)
            result = self.env.call(fork, call)
            msgs = [assistant(None, [call]), tool_result(call.id, result.content), assistant("done that")]
            turns.append(
                AgentTurn(
                    messages=msgs,
                    reply="done that",
                    state=fork,
                    completed_goals=list(result.completed_goals),
                    llm_calls=1,
                )
            )
        return turns


class Apologetic:
    """An agent that never calls a tool: no search it runs is ever rewarded."""

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame()

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        return [AgentTurn(state=state.fork(), messages=[assistant("Sorry.")], reply="Sorry.") for _ in range(n)]


class CountingUser:
    """Says hello, then ends after ``turns`` agent replies."""

    def __init__(self, turns: int = 3) -> None:
        self.turns = turns

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        agent_turns = sum(m.role == "assistant" for m in transcript)
        if agent_turns >= self.turns:
            return UserTurn(text="bye", done=True)
        return UserTurn(text=f"please do step {agent_turns}")


def path_of(messages: list[Message]) -> Path:
    """The branch path written in the last assistant reply ("reply 1.0" → (1, 0)); the root is ()."""
    for m in reversed(messages):
        if m.role == "assistant" and m.content and m.content.startswith("reply"):
            text = m.content.removeprefix("reply").strip()
            return tuple(int(p) for p in text.split(".")) if text else ()
    return ()


def label(path: Path) -> str:
    return ".".join(str(p) for p in path)


@dataclass
class TableAgent:
    """``goals[path]``: goals the turn at ``path`` completes; ``raises``: parent paths whose call fails;
    ``ends``: paths whose turn terminates the environment; ``errors``: paths whose turn has tool errors;
    ``system``: the system prompt of its frame; ``slow``: parent paths whose turn takes 0.05 s longer."""

    goals: dict[Path, tuple[int, ...]] = field(default_factory=dict)
    raises: set[Path] = field(default_factory=set)
    ends: set[Path] = field(default_factory=set)
    errors: set[Path] = field(default_factory=set)
    delay: float = 0.0
    slow: set[Path] = field(default_factory=set)
    system: str | None = "SYS"
    calls: list[tuple[Path, int]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame(system=self.system, tools=TOOLS)

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        parent = path_of(history)
        self.calls.append((parent, n))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay + (0.05 if parent in self.slow else 0.0))
        finally:
            self.in_flight -= 1
        if parent in self.raises:
            raise RuntimeError(f"agent broke at {label(parent)}")
        return [self._one(parent + (j,), state) for j in range(n)]

    def _one(self, path: Path, state: ConversationState) -> AgentTurn:
        fork = state.fork()
        done = [g for g in self.goals.get(path, ()) if g not in fork.completed]
        fork.completed.update(done)
        fork.terminated = path in self.ends
        call = ToolCall(name="act", arguments={"path": label(path)})
        messages = [
            assistant(None, [call]),
            tool_result(call.id, f"ok {label(path)}"),
            assistant(f"reply {label(path)}"),
        ]
        errors = [ErrorCategory.INVALID_VALUE] if path in self.errors else []
        return AgentTurn(
            messages=messages,
            reply=f"reply {label(path)}",
            state=fork,
            completed_goals=done,
            errors=errors,
            llm_calls=1,
            prompt_tokens=10,
            completion_tokens=5,
        )


@dataclass
class TableUser:
    """Answers "user <path>"; says done at ``done`` paths, fails at ``raises`` paths, gives up (an ``error``
    turn) at ``gives_up`` paths; never ends otherwise."""

    done: set[Path] = field(default_factory=set)
    raises: set[Path] = field(default_factory=set)
    gives_up: set[Path] = field(default_factory=set)
    delay: float = 0.0
    calls: list[Path] = field(default_factory=list)

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        path = path_of(transcript)
        self.calls.append(path)
        await asyncio.sleep(self.delay)
        assert all(m.role in ("user", "assistant") and not m.tool_calls for m in transcript)
        if path in self.raises:
            raise RuntimeError(f"user broke at {label(path)}")
        if path in self.gives_up:
            return UserTurn(text="", done=True, error="the user LLM failed", llm_calls=1)
        text = f"user {label(path)}" if path else "hello, I need help"
        return UserTurn(text=text, done=path in self.done, llm_calls=1, prompt_tokens=7, completion_tokens=3)
