"""The goal-based LLM user: a customer pursuing the task's goal text, revealing details piecemeal, ending the
call with a stop marker. Also the helpers the other LLM users share (role-flipped views, marker handling).

The simulator is stateless: each reply is computed from the task and the visible transcript alone. The LLM plays
the customer as the ``assistant``; the agent's spoken replies are shown to it as the ``user`` side. Given the
environment's user tools (``with_tools``: τ² telecom's device), the prompt gains the ``device`` section, the tools
go to the backend, and a reply that calls them is the user's tool step (``josh.users.device``); the user sees its
own calls and their results in the transcript at its next step.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import logging
import re
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.core.llm import LLM, Completion, ContextLengthError, LLMError, Sampling, Tools
from josh.core.user import UserSimulator, UserTurn
from josh.types import Message, Task, assistant, system, user
from josh.users import register_user
from josh.users.device import device_calls, tool_names

log = logging.getLogger(__name__)

STOP_MARKER = "END_CONVERSATION"
OPENING_CUE = "(The agent has picked up the call. Say your first message.)"
_LABEL = re.compile(r"^\s*(?:customer|user|you)\s*:\s*", re.IGNORECASE)


class UserConfig(BaseModel):
    """Options of the LLM users; unknown names are rejected."""

    model_config = ConfigDict(extra="forbid")

    sampling: Sampling = Field(default_factory=lambda: Sampling(temperature=0.0, max_new_tokens=256))
    stop_marker: str | None = Field(None, min_length=1, description="overrides the simulator's default marker")


@functools.cache
def prompt_template(name: str) -> Template:
    """A user-simulator prompt shipped in ``josh/users/prompts``."""
    return Template(importlib.resources.files("josh.users.prompts").joinpath(f"{name}.txt").read_text("utf-8"))


def customer_view(transcript: list[Message]) -> list[Message]:
    """The transcript seen from the customer's side: agent replies as ``user``, the customer's own lines as
    ``assistant``, after an opening cue; consecutive lines of one side are merged so roles alternate. The
    customer's own device calls are its ``assistant`` calls, answered by their ``tool`` results."""
    view: list[Message] = [user(OPENING_CUE)]
    for message in transcript:
        if message.role == "user" and message.tool_calls:
            view.append(assistant(None, list(message.tool_calls)))
            continue
        if message.role == "tool":
            view.append(message)
            continue
        if message.role not in ("user", "assistant") or not message.content:
            continue
        role = "assistant" if message.role == "user" else "user"
        if view[-1].role == role and not view[-1].tool_calls:
            view[-1] = Message(role=role, content=f"{view[-1].content}\n{message.content}")
        else:
            view.append(assistant(message.content) if role == "assistant" else user(message.content))
    return view


def split_marker(text: str, marker: str) -> tuple[str, bool]:
    """Remove every stop marker (and a leading speaker label) from ``text``; the flag says one was there."""
    done = marker in text
    cleaned = _LABEL.sub("", text.replace(marker, "")).strip()
    return cleaned, done


async def ask(llm: LLM, messages: list[Message], sampling: Sampling, tools: Tools = None) -> Completion | str:
    """One completion, or the reason there is none (an ``LLMError`` or an empty answer); a prompt longer than the
    model's context raises ``ContextLengthError``: the conversation's own ending (``josh.run.step``)."""
    try:
        completions = await llm.chat(messages, tools=tools, n=1, sampling=sampling)
    except ContextLengthError:
        raise
    except LLMError as exc:
        log.warning("user-simulator LLM call failed: %s", exc)
        return f"LLM error: {exc}"
    return completions[0] if completions else "the LLM returned no completion"


def failed(reason: str, llm_calls: int = 1) -> UserTurn:
    """The user gives up: the conversation ends and the reason is kept."""
    return UserTurn(text="", done=True, error=reason, llm_calls=llm_calls)


class GoalUser:
    """A customer with the task's ``user_goal``; see the module docstring."""

    prompt_name = "goal"
    default_marker = STOP_MARKER

    def __init__(self, llm: LLM, config: UserConfig | None = None, **options: object) -> None:
        if llm is None:
            raise ValueError(f"the {self.prompt_name} user simulator needs an LLM backend")
        self.llm = llm
        self.config = config or UserConfig(**options)
        self.stop_marker = self.config.stop_marker or self.default_marker
        self.tools: list[dict[str, Any]] = []

    def with_tools(self, tools: list[dict[str, Any]]) -> UserSimulator:
        """This user with a device: it may call ``tools`` (OpenAI function schemas)."""
        equipped = copy.copy(self)
        equipped.tools = list(tools)
        return equipped

    def messages(self, task: Task, transcript: list[Message]) -> list[Message]:
        """The request: the role prompt with the goal (and the device section when the user has tools), then the
        conversation from the customer's side."""
        prompt = prompt_template(self.prompt_name).substitute(goal=task.user_goal.strip(), stop=self.stop_marker)
        if self.tools:
            prompt += prompt_template("device").substitute(tools=", ".join(tool_names(self.tools)))
        return [system(prompt), *customer_view(transcript)]

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        if not task.user_goal.strip():
            return failed(f"task {task.id} has no user goal text", llm_calls=0)
        answer = await ask(self.llm, self.messages(task, transcript), self.config.sampling, self.tools or None)
        if isinstance(answer, str):
            return failed(answer)
        calls = device_calls(answer) if self.tools else []
        if calls:
            return with_tokens(UserTurn(text="", tool_calls=calls), answer)
        text, done = split_marker(answer.text, self.stop_marker)
        if not text and not done:
            return with_tokens(failed("the user LLM wrote nothing"), answer)
        return with_tokens(UserTurn(text=text, done=done), answer)


def with_tokens(turn: UserTurn, completion: Completion) -> UserTurn:
    """Record one LLM call and its token counts on ``turn``."""
    turn.llm_calls = 1
    turn.prompt_tokens = completion.prompt_tokens
    turn.completion_tokens = completion.completion_tokens
    return turn


register_user("goal", GoalUser, options=UserConfig, needs_model=True, summary="an LLM customer with the goal text")
