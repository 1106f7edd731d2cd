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

from pydantic import BaseModel, ConfigDict, Field, field_validator

from josh.util.storable import clean_text, json_problem, read_json, to_storable

Role = Literal["system", "user", "assistant", "tool"]


class ErrorCategory(str, Enum):
    """Why a tool call or an agent output failed (paper fig. 4b: malformed vs. bad API use).

    ``UNSTORABLE``: the output held what a UTF-8 JSON record cannot keep (a lone surrogate, nesting deeper than
    ``josh.util.storable.MAX_DEPTH``): the text was repaired or the call refused. ``USER_ERROR``: the user simulator
    failed (its LLM, its rules); it is the simulator's error, never counted in the agent's error shares.
    """

    MALFORMED = "malformed"
    UNSTORABLE = "unstorable"
    UNKNOWN_TOOL = "unknown_tool"
    UNKNOWN_ARGUMENT = "unknown_argument"
    INVALID_VALUE = "invalid_value"
    TOOL_ERROR = "tool_error"
    LLM_ERROR = "llm_error"
    NO_REPLY = "no_reply"
    USER_ERROR = "user_error"

    @property
    def is_malformed(self) -> bool:
        """An output the agent's protocol or a JSON record could not take as written."""
        return self in (ErrorCategory.MALFORMED, ErrorCategory.UNSTORABLE)

    @property
    def is_bad_api_use(self) -> bool:
        return self in (
            ErrorCategory.UNKNOWN_TOOL,
            ErrorCategory.UNKNOWN_ARGUMENT,
            ErrorCategory.INVALID_VALUE,
        )


SUCCESS_TOLERANCE = 1e-6


def is_success(reward: float) -> bool:
    """Whether a conversation's reward counts as success (full reward, up to float noise): reward >= 1 - 1e-6."""
    return reward >= 1.0 - SUCCESS_TOLERANCE


def new_call_id() -> str:
    """A random id, for a call built outside a conversation (josh's agents and runners name theirs: ``call_id``)."""
    return "call_" + uuid.uuid4().hex[:12]


def call_id(position: int, index: int = 0, *, side: str = "call") -> str:
    """The id of a conversation's tool call, from where it is: ``call_<position>_<index>`` for the ``index``-th call
    of the message at ``position`` in the agent's history (``side="user"``: ``user_<position>_<index>`` for a user's
    device call, at its position in the transcript). The same conversation gets the same ids on every run, and no
    two calls of one conversation share one; OpenAI-compatible servers take any string as an id."""
    return f"{side}_{position}_{index}"


class ToolCall(BaseModel):
    """One function call. ``arguments`` is a dict when it parsed, else the raw text the model wrote."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str = Field(default_factory=new_call_id)

    @field_validator("name", "id")
    @classmethod
    def _clean_name(cls, value: str) -> str:
        return clean_text(value)

    @field_validator("arguments")
    @classmethod
    def _clean_raw_arguments(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        return clean_text(value) if isinstance(value, str) else value

    def to_openai(self) -> dict[str, Any]:
        args = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": args}}

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ToolCall:
        """Read an OpenAI tool call; arguments that are not a storable JSON object stay the raw text."""
        fn = data.get("function")
        fn = fn if isinstance(fn, dict) else data
        name, call_id = fn.get("name"), data.get("id")
        return cls(
            name=name if isinstance(name, str) else "",
            arguments=_read_arguments(fn.get("arguments", {})),
            id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
        )


def _read_arguments(args: Any) -> dict[str, Any] | str:
    """Tool-call arguments as a dict when they are a storable JSON object, else as text."""
    if isinstance(args, str):
        try:
            parsed = read_json(args) if args.strip() else {}
        except (ValueError, RecursionError):
            return args
        return parsed if isinstance(parsed, dict) and json_problem(parsed) is None else args
    if isinstance(args, dict) and json_problem(args) is None:
        return args
    return json.dumps(to_storable(args), ensure_ascii=False)


class Message(BaseModel):
    """A chat message in OpenAI format."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_call_id: str | None = None

    @field_validator("content", "tool_call_id")
    @classmethod
    def _clean_content(cls, value: str | None) -> str | None:
        return clean_text(value) if isinstance(value, str) else value

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

    ``env`` names the environment that plays it (no default: a task never lands in another environment by
    accident). ``details`` holds what only that environment reads (ToolWOZ: per-domain info/book/fail_info/
    fail_book/reqt and the booked entities; τ-bench: user id, gold actions, required outputs).
    """

    id: str
    env: str
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
