"""The guide LLM user: a coach sees the goal, the original dialogue (``task.transcript``) and the conversation so
far, writes advice and a suggested quote; the quote is what the simulated customer says.

Both transcripts are labelled by who spoke (``customer`` for the user side, ``agent`` for the assistant side).
When the coach omits the quote marker, the last quoted passage of its answer is used, else its last line; the
advice itself is never sent as the utterance.
"""

from __future__ import annotations

import re

from josh.core.llm import LLM
from josh.core.user import UserTurn
from josh.types import Message, Task, user
from josh.users import register_user
from josh.users.goal import STOP_MARKER, UserConfig, ask, failed, prompt_template, split_marker, with_tokens

QUOTE_MARKER = "Suggested quote:"
NOT_STARTED = "(not started yet)"
_MARKER = re.compile(re.escape(QUOTE_MARKER), re.IGNORECASE)
_QUOTED = re.compile(r"[\"“]([^\"”\n]+)[\"”]")
_QUOTES = "\"'“”‘’"


def label_transcript(messages: list[Message]) -> str:
    """``customer: ...`` / ``agent: ...`` lines; tool traffic and empty messages are left out."""
    names = {"user": "customer", "assistant": "agent"}
    lines = [f"{names[m.role]}: {m.content.strip()}" for m in messages if m.role in names and m.content]
    return "\n".join(lines) or NOT_STARTED


def extract_quote(advice: str) -> str:
    """The customer's utterance in a coach answer: the first paragraph after the last quote marker; without a
    marker, the last quoted passage, else the last non-empty line."""
    markers = list(_MARKER.finditer(advice))
    if markers:
        tail = advice[markers[-1].end() :].strip()
        quote = tail.split("\n\n", 1)[0]
    else:
        quoted = _QUOTED.findall(advice)
        lines = [line for line in advice.splitlines() if line.strip()]
        quote = quoted[-1] if quoted else (lines[-1] if lines else "")
    return " ".join(quote.split()).strip(_QUOTES + " ")


class GuideUser:
    """A customer whose every line is suggested by a coach that follows the original dialogue."""

    def __init__(self, llm: LLM, config: UserConfig | None = None, **options: object) -> None:
        if llm is None:
            raise ValueError("the guide user simulator needs an LLM backend")
        self.llm = llm
        self.config = config or UserConfig(**options)
        self.stop_marker = self.config.stop_marker or STOP_MARKER

    def messages(self, task: Task, transcript: list[Message]) -> list[Message]:
        """One user message holding the coach prompt."""
        prompt = prompt_template("guide").substitute(
            goal=task.user_goal.strip() or "(no goal text given)",
            source=label_transcript(task.transcript),
            current=label_transcript(transcript),
            marker=QUOTE_MARKER,
            stop=self.stop_marker,
        )
        return [user(prompt)]

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        if not task.transcript:
            return failed(f"task {task.id} has no original transcript for the guide", llm_calls=0)
        answer = await ask(self.llm, self.messages(task, transcript), self.config.sampling)
        if isinstance(answer, str):
            return failed(answer)
        text, done = split_marker(extract_quote(answer.text), self.stop_marker)
        if not text and not done:
            return with_tokens(failed("the guide wrote no usable quote"), answer)
        return with_tokens(UserTurn(text=text, done=done), answer)


register_user(
    "guide", GuideUser, options=UserConfig, needs_model=True, summary="an LLM coached by the original dialogue"
)
