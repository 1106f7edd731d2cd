"""Tiny protocol-conforming env, agent and user for testing the drivers without real components."""

from __future__ import annotations

import json

from josh.agents.base import AgentTurn
from josh.envs.base import ConversationState
from josh.types import CallRecord, ErrorCategory, Goal, Message, Task, ToolCall, ToolResult, assistant, tool_result
from josh.users.base import UserTurn


def make_tasks(n: int, goals: int = 1) -> list[Task]:
    return [Task(id=f"t{i:03d}", env="fake", goals=[Goal(name=f"g{j}") for j in range(goals)]) for i in range(n)]


class FakeEnv:
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


class CallingAgent:
    """Each turn calls the next uncompleted goal's tool unless the task id is in ``fail``; then speaks."""

    def __init__(self, fail: set[str] = frozenset(), raise_on: set[str] = frozenset()) -> None:
        self.env = FakeEnv()
        self.fail = fail
        self.raise_on = raise_on

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


class CountingUser:
    """Says hello, then ends after ``turns`` agent replies."""

    def __init__(self, turns: int = 3) -> None:
        self.turns = turns

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        agent_turns = sum(m.role == "assistant" for m in transcript)
        if agent_turns >= self.turns:
            return UserTurn(text="bye", done=True)
        return UserTurn(text=f"please do step {agent_turns}")
