"""A deterministic rule-based τ-bench customer (retail, airline) for tests and gold runs: opens with the task's
request, says "yes" to questions, and stops once the agent reports back without a question (or after a number of
agent replies)."""

from __future__ import annotations

import re

from josh.core.user import UserTurn
from josh.registry import Entry, entry, options_of
from josh.types import Message, Task

STOP = "###STOP###"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_REQUEST = re.compile(r"#W\d|\b(want|wish|would like|need)\b", re.IGNORECASE)
_FIRST_PERSON = (
    (re.compile(r"\byou are\b", re.IGNORECASE), "I am"),
    (re.compile(r"\byou're\b", re.IGNORECASE), "I'm"),
    (re.compile(r"\byou've\b", re.IGNORECASE), "I've"),
    (re.compile(r"\byour\b", re.IGNORECASE), "my"),
    (re.compile(r"\byou\b", re.IGNORECASE), "I"),
)


def opening_line(task: Task) -> str:
    """The first request: the instruction's first sentence that asks for something, told in the first person."""
    text = str(task.details.get("instruction") or task.user_goal or "").strip()
    sentences = [s for s in _SENTENCE_END.split(text) if s]
    if not sentences:
        return "Hi! I need help with my order."
    request = next((s for s in sentences if _REQUEST.search(s)), sentences[0])
    for pattern, replacement in _FIRST_PERSON:
        request = pattern.sub(replacement, request)
    return f"Hi! {request}"


class TauScriptedUser:
    """Stateless and deterministic; the reply depends only on the transcript.

    * no agent reply yet: the opening line;
    * ``max_turns`` agent replies seen: ``###STOP###``;
    * the agent's last reply asks something (contains ``?``): ``confirm``;
    * otherwise the agent has reported back, so the user is done: ``###STOP###``.
    """

    def __init__(self, *, max_turns: int = 10, confirm: str = "yes") -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.max_turns = max_turns
        self.confirm = confirm

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        agent_replies = [m.content or "" for m in transcript if m.role == "assistant"]
        if not agent_replies:
            return UserTurn(text=opening_line(task))
        if len(agent_replies) >= self.max_turns or "?" not in agent_replies[-1]:
            return UserTurn(text=STOP, done=True)
        return UserTurn(text=self.confirm)


def scripted_entry(name: str, user: type[TauScriptedUser], summary: str, envs: tuple[str, ...] | None = None) -> Entry:
    """The registry entry of a scripted τ user: built from its options alone (it takes no LLM)."""
    return entry(
        name,
        lambda llm, **options: user(**options),
        builder_args=1,
        noun="user",
        options=options_of(user),
        envs=envs,
        summary=summary,
    )


RETAIL_SCRIPTED = scripted_entry("retail_scripted", TauScriptedUser, "opens with the task's request, confirms, stops")
"""The ``retail_scripted`` user, which ``josh.users.USERS`` names (``josh.envs.taubench.user:RETAIL_SCRIPTED``)."""
