"""Core records every stage stores: chat messages, tool calls, tasks and goals.

Messages follow the OpenAI chat format (role, content, tool_calls, tool_call_id). Everything here is a pydantic
model, so ``model_dump_json()`` / ``model_validate_json()`` round-trip it exactly.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ErrorCategory(str, Enum):
    """Why a tool call or an agent output failed (paper fig. 4b: malformed vs. bad API use)."""

    MALFORMED = "malformed"
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_ARGUMENT = "unknown_argument"
    INVALID_VALUE = "invalid_value"
    TOOL_ERROR = "tool_error"
    LLM_ERROR = "llm_error"
    NO_REPLY = "no_reply"

    @property
    def is_bad_api_use(self) -> bool:
        return self in (
            ErrorCategory.UNKNOWN_TOOL,
            ErrorCategory.UNKNOWN_ARGUMENT,
            ErrorCategory.INVALID_VALUE,
        )


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


class ToolCall(BaseModel):
    """One function call. ``arguments`` is a dict when it parsed, else the raw text the model wrote."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str = Field(default_factory=new_call_id)

    def to_openai(self) -> dict[str, Any]:
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ToolCall:
        fn = data.get("function", data)
        args: Any = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                parsed = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                parsed = args
            args = parsed if isinstance(parsed, dict) else args
        return cls(name=fn.get("name", ""), arguments=args, id=data.get("id") or new_call_id())


class Message(BaseModel):
    """A chat message in OpenAI format."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    def to_template(self) -> dict[str, Any]:
        """The dict chat templates expect (tool-call arguments as objects, not strings)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}, "id": c.id}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> Message:
        calls = data.get("tool_calls")
        return cls(
            role=data["role"],
            content=data.get("content"),
            tool_calls=tuple(ToolCall.from_openai(c) for c in calls) if calls else None,
            tool_call_id=data.get("tool_call_id"),
        )


def system(text: str) -> Message:
    return Message(role="system", content=text)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str | None = None, calls: list[ToolCall] | None = None) -> Message:
    return Message(role="assistant", content=text, tool_calls=tuple(calls) if calls else None)


def tool_result(call_id: str, text: str) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id)


class Goal(BaseModel):
    """A goal API call: completing it earns 1/|goals| of the reward."""

    model_config = ConfigDict(frozen=True)

    name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    expected_return: dict[str, Any] | None = None


class Task(BaseModel):
    """One conversation to run: the user's goal, the goal API calls, and environment-specific details.

    ``details`` holds what only one environment reads (ToolWOZ: per-domain info/book/fail_info/fail_book/reqt and
    the booked entities; retail: user id, gold actions, required outputs).
    """

    id: str
    env: str = "toolwoz"
    split: str | None = None
    user_goal: str = ""
    goals: list[Goal] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    transcript: list[Message] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What one tool call returned: the text the agent sees, its error category and the goals it completed.

    A plain slotted dataclass, not a pydantic model: environments build one per call on the hot path.
    """

    content: str
    error: ErrorCategory | None = None
    completed_goals: tuple[int, ...] = ()
    terminal: bool = False
    data: Any = None


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One entry of a conversation's call log (kept per branch, so cheap to build)."""

    name: str
    arguments: dict[str, Any] | str
    content: str
    error: ErrorCategory | None = None
    completed_goals: tuple[int, ...] = ()
