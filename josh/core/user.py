"""The user-simulator protocol: a reply to the conversation so far, or the end of the conversation."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from josh.types import Message, Task, ToolCall


class UserTurn(BaseModel):
    """What the simulated user says; ``done`` means the user ended the conversation; ``error`` says why a
    simulator gave up (e.g. its LLM failed), ``None`` for a normal reply. ``tool_calls``: calls the user makes on
    their own side before saying ``text`` (τ² telecom's device tools), run through the environment's ``user_call``;
    with no ``text`` the user is asked again with the results in view (``josh.run.user_turn``). A simulator whose
    prompt outgrows its model's context raises ``ContextLengthError`` instead of replying."""

    text: str
    done: bool = False
    tool_calls: list[ToolCall] = Field(default_factory=list)
    error: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class UserSimulator(Protocol):
    """Stateless: the reply depends only on the task and the visible transcript (user utterances, the agent's
    spoken replies, and the user's own device calls with their results; never the agent's tool traffic), so forking
    a conversation needs no copy of the simulator."""

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn: ...


@runtime_checkable
class ToolUser(Protocol):
    """A simulator that can act on the user's own device: ``with_tools`` gives it the environment's user tools
    (OpenAI function schemas) and returns the simulator that calls them (``make_user(..., user_tools=...)``)."""

    def with_tools(self, tools: list[dict[str, Any]]) -> UserSimulator: ...
