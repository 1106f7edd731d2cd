"""The ``echo`` environment and its scripted user ``echo_user``: josh's example plugin (see the README)."""

from __future__ import annotations

import json
from typing import Any

from josh.core.env import ConversationState, EnvBase
from josh.types import ErrorCategory, Message, Task, ToolCall, ToolResult
from josh.core.user import UserTurn

WORDS = {"train": ("apple", "river", "stone"), "test": ("cloud", "ember")}


def _tool(name: str, description: str, argument: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


TOOLS = [
    _tool("shout", "Say a word back in capitals.", "word"),
    _tool("submit", "Give the user the final answer; ends the conversation.", "answer"),
]


class EchoState(ConversationState):
    """The conversation plus the answer submitted on this branch."""

    __slots__ = ("answer",)
    branch_fields = (*ConversationState.branch_fields, "answer")

    def __init__(self, task: Task) -> None:
        super().__init__(task)
        self.answer: str | None = None


class EchoEnv(EnvBase):
    """Shout the user's word back and submit it: reward 1.0 when the submitted answer is the word in capitals."""

    name = "echo"
    tools = TOOLS
    splits = tuple(WORDS)
    outcome_reward = True  # goal-less tasks: the search ranks finished branches by the final reward
    write_tools = frozenset({"submit"})

    def system_prompt(self, task: Task) -> str:
        return "You shout words back. Call shout, then submit the shouted word."

    def tasks(self, split: str) -> list[Task]:
        if split not in WORDS:
            raise ValueError(f"unknown echo split {split!r}; known splits: {', '.join(WORDS)}")
        return [
            Task(
                id=f"echo-{split}-{i}",
                env=self.name,
                split=split,
                user_goal=f"Please shout the word {word}.",
                details={"word": word, "actions": [{"name": "submit", "kwargs": {"answer": word.upper()}}]},
            )
            for i, word in enumerate(WORDS[split])
        ]

    def reset(self, task: Task) -> EchoState:
        return EchoState(task)

    def step(self, state: EchoState, call: ToolCall) -> ToolResult:
        """One call: josh logs it and ends the conversation on a ``terminal`` result (``EnvBase.call``)."""
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        value = arguments.get("word" if call.name == "shout" else "answer")
        if call.name not in ("shout", "submit"):
            return ToolResult(f"Error: unknown tool {call.name!r}", ErrorCategory.UNKNOWN_TOOL)
        if not isinstance(value, str):
            return ToolResult(f"Error: {call.name} needs one string argument", ErrorCategory.INVALID_VALUE)
        if call.name == "shout":
            return ToolResult(json.dumps({"shouted": value.upper()}))
        state.answer = value
        return ToolResult(json.dumps({"submitted": value}), terminal=True)

    def reward(self, state: EchoState, messages: list[Message]) -> float:
        return float(state.answer == str(state.task.details["word"]).upper())


class EchoUser:
    """Asks for its word, then thanks the agent and leaves."""

    def __init__(self, llm: object = None) -> None:
        pass

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        if not any(m.role == "user" for m in transcript):
            return UserTurn(text=task.user_goal)
        return UserTurn(text="Thanks, bye!", done=True)


def register_env() -> None:
    """The ``josh.environments`` entry point: ``--env echo``."""
    from josh.envs import register_env as register

    register(
        "echo",
        lambda data: EchoEnv(),
        own_data="makes its own tasks",
        summary="example plugin: shout a word back (goal-less tasks)",
    )


def register_user() -> None:
    """The ``josh.users`` entry point: ``--user echo_user`` (on the echo environment only)."""
    from josh.users import register_user as register

    register("echo_user", EchoUser, envs=("echo",), summary="asks for its word, then leaves")
