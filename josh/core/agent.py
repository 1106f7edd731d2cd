"""The agent interface: one full agent turn (thoughts, tool calls on a fork of the state, results) until it speaks,
and the frame the agent puts around the conversation for its model."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from josh.core.env import ConversationState
from josh.types import ErrorCategory, Message, Task


class AgentTurn(BaseModel):
    """One sampled agent turn.

    ``messages`` are the agent's own messages of this turn (assistant outputs, tool results), in the order the
    agent saw them; ``reply`` is what the user sees (``None`` when the turn ended without speaking);
    ``state`` is the conversation state after the turn's tool calls (a fork, never the caller's state);
    ``overflow`` says why the turn was cut short when its prompt outgrew the model's context after a tool call (the
    ``ContextLengthError``'s message): the conversation ends after it with ``context_length``. An agent whose first
    request of a turn overflows raises ``ContextLengthError`` instead.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: list[Message] = Field(default_factory=list)
    reply: str | None = None
    state: ConversationState
    completed_goals: list[int] = Field(default_factory=list)
    errors: list[ErrorCategory] = Field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    overflow: str | None = None

    @property
    def terminated(self) -> bool:
        """The environment ended the conversation during this turn (e.g. a transfer to a human)."""
        return self.state.terminated


class PromptFrame(BaseModel):
    """What an agent puts around the conversation for its model on a task: the system prompt, the messages between
    it and the conversation (worked examples as turns), the tool schemas passed to the backend, and the name of its
    output protocol. A scripted agent has no prompt: its frame holds the environment's tools only."""

    system: str | None = None
    preamble: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    protocol: str | None = None


@runtime_checkable
class Agent(Protocol):
    """``turn`` samples ``n`` independent continuations of the same history; each runs on its own fork.
    ``frame`` says what the agent shows its model besides the conversation (recorded with every search tree)."""

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]: ...

    def frame(self, task: Task) -> PromptFrame: ...
