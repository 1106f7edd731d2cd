"""Table-driven agent, user and environment for the search / extract / rollout tests, and checks of the fakes.

A branch is named by its path of sibling indices: the root is ``()``, its second child ``(1,)``, that child's first
child ``(1, 0)``. The agent writes the path into its reply ("reply 1.0"), so a later turn knows where it is and the
table decides what each turn does; the expected tree is therefore known exactly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from josh.agents.base import Agent, AgentTurn
from josh.envs.base import ConversationState, Env
from josh.types import ErrorCategory, Goal, Message, Task, ToolCall, assistant, tool_result
from josh.users.base import UserSimulator, UserTurn

Path = tuple[int, ...]
TOOLS = [{"type": "function", "function": {"name": "act", "parameters": {"type": "object", "properties": {}}}}]


def path_of(messages: list[Message]) -> Path:
    """The branch path written in the last assistant reply ("reply 1.0" → (1, 0)); the root is ()."""
    for m in reversed(messages):
        if m.role == "assistant" and m.content and m.content.startswith("reply"):
            text = m.content.removeprefix("reply").strip()
            return tuple(int(p) for p in text.split(".")) if text else ()
    return ()


def label(path: Path) -> str:
    return ".".join(str(p) for p in path)


def make_task(n_goals: int = 2, task_id: str = "t0") -> Task:
    return Task(env="fake", id=task_id, goals=[Goal(name=f"g{i}") for i in range(n_goals)])


class FakeEnv:
    name = "fake"
    tools = TOOLS

    def system_prompt(self, task: Task) -> str:
        return "You are a test agent."

    def reset(self, task: Task) -> ConversationState:
        return ConversationState(task)

    def call(self, state: ConversationState, call: ToolCall) -> Any:
        raise NotImplementedError

    def reward(self, state: ConversationState, messages: list[Message]) -> float:
        return state.goal_reward

    def tasks(self, split: str) -> list[Task]:
        return []


@dataclass
class TableAgent:
    """``goals[path]``: goals the turn at ``path`` completes; ``raises``: parent paths whose call fails;
    ``ends``: paths whose turn terminates the environment; ``errors``: paths whose turn has tool errors."""

    goals: dict[Path, tuple[int, ...]] = field(default_factory=dict)
    raises: set[Path] = field(default_factory=set)
    ends: set[Path] = field(default_factory=set)
    errors: set[Path] = field(default_factory=set)
    delay: float = 0.0
    calls: list[tuple[Path, int]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        parent = path_of(history)
        self.calls.append((parent, n))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
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


def test_fakes_follow_the_protocols() -> None:
    assert isinstance(TableAgent(), Agent)
    assert isinstance(TableUser(), UserSimulator)
    assert isinstance(FakeEnv(), Env)


async def test_table_agent_names_siblings_by_path() -> None:
    agent = TableAgent(goals={(1,): (0,)})
    turns = await agent.turn([], ConversationState(make_task()), n=2)
    assert [t.reply for t in turns] == ["reply 0", "reply 1"]
    assert [t.completed_goals for t in turns] == [[], [0]]
    assert path_of(turns[1].messages) == (1,)
