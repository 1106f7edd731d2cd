"""A fake environment where the user has a phone (like τ² telecom, without τ²), and a scripted LLM customer for it.

``PhoneEnv``: ``FakeEnv``'s agent tools plus two user tools, ``toggle_data`` and ``set_apn(apn)``; the phone's
settings live in the state (``PhoneState.device``), and the reward is 1.0 once mobile data is on. ``phone_policy``
is a scripted-LLM policy for the ``goal`` user: it opens, calls ``toggle_data`` when the agent asks for it, then
reports the result it was shown, and hangs up when the agent asks whether there is anything else. ``HelpDesk`` is
an agent that only talks: first it asks for mobile data, then whether there is anything else.
"""

from __future__ import annotations

from typing import Any

from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState
from josh.core.llm import Completion
from josh.types import ErrorCategory, Goal, Message, Task, ToolCall, ToolResult, assistant
from josh.users.goal import STOP_MARKER
from tests.fakes.conversation import FakeEnv


def _tool(name: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    properties = {key: {"type": "string"} for key in required}
    parameters = {"type": "object", "properties": properties, "required": list(required)}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": parameters}}


USER_TOOLS = [_tool("toggle_data"), _tool("set_apn", ("apn",))]
ASK = "Please turn on your mobile data."
ANYTHING_ELSE = "Is there anything else?"
OPENING = "My phone has no internet."


def phone_task(task_id: str = "phone-0") -> Task:
    return Task(
        id=task_id, env="fake", user_goal="Your mobile data does not work; get it fixed.", goals=[Goal(name="g0")]
    )


class PhoneState(ConversationState):
    """The conversation state plus the user's phone."""

    __slots__ = ("device",)
    branch_fields = (*ConversationState.branch_fields, "device")

    def __init__(self, task: Task) -> None:
        super().__init__(task)
        self.device: dict[str, Any] = {"data": False, "apn": None}


class PhoneEnv(FakeEnv):
    """``FakeEnv`` with the user's phone (see the module docstring)."""

    name = "phone"
    user_tools = USER_TOOLS

    def reset(self, task: Task) -> PhoneState:
        return PhoneState(task)

    def user_call(self, state: PhoneState, call: ToolCall) -> ToolResult:
        if call.name not in {"toggle_data", "set_apn"}:
            return ToolResult(f"Error: Tool '{call.name}' not found.", ErrorCategory.UNKNOWN_TOOL)
        if not isinstance(call.arguments, dict):
            return ToolResult(f"Error: the arguments of {call.name} must be a JSON object", ErrorCategory.MALFORMED)
        if call.name == "set_apn":
            if "apn" not in call.arguments:
                return ToolResult("Error: set_apn needs apn", ErrorCategory.MALFORMED)
            state.device["apn"] = call.arguments["apn"]
            return ToolResult(f"APN is now {call.arguments['apn']}.")
        state.device["data"] = not state.device["data"]
        return ToolResult(f"Mobile data is now {'ON' if state.device['data'] else 'OFF'}.")

    def reward(self, state: PhoneState, messages: list[Message]) -> float:
        return 1.0 if state.device["data"] else 0.0


def phone_policy(messages: list[Message], tools: list[dict[str, Any]] | None, index: int) -> str | Completion:
    """The customer as the scripted LLM plays it (it sees the agent as ``user``, itself as ``assistant``)."""
    last = messages[-1]
    if last.role == "tool":
        return f"I did it. It says: {last.content}"
    if last.role == "user" and ANYTHING_ELSE in (last.content or ""):
        return f"No, thanks. {STOP_MARKER}"
    if last.role == "user" and ASK in (last.content or "") and tools:
        return Completion(tool_calls=[ToolCall(name="toggle_data", arguments={})])
    return OPENING


class HelpDesk:
    """An agent that only talks (see the module docstring)."""

    lines = (ASK, ANYTHING_ELSE)

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame()

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        said = self.lines[min(sum(m.role == "assistant" for m in history), len(self.lines) - 1)]
        return [AgentTurn(state=state.fork(), messages=[assistant(said)], reply=said) for _ in range(n)]
