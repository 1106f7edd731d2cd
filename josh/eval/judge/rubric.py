"""The three turn-level dimensions a judge scores, the prompt it reads (josh's own wording of TD-Eval's rubric), the
grammar that keeps its answer well formed, and what one judgement records.

The judge sees the conversation up to the reply (the user's messages, the agent's replies, every tool call the agent
made and what the tool returned), the reply itself, and the domain's policy, and scores each dimension from 1 (bad)
to 5 (good) with one sentence why. Without a policy the policy dimension is not scored (``None``, "n/a").

``PROMPT_VERSION`` names the prompt: a release label plus a hash of the prompt and grammar as rendered for a fixed
conversation, so any change to the wording changes it, and judgements cached under the old prompt are not reused.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from josh.core.llm import Spent
from josh.types import Message, ToolCall, assistant, system, tool_result, user

PROMPT_LABEL = "josh-judge-1"
LOW, HIGH = 1, 5
DIMENSIONS: dict[str, str] = {
    "cohesion": "Conversation cohesion: the reply follows from the conversation so far. It responds to what the user "
    "just said, keeps the details already agreed, moves the task on, and neither repeats nor contradicts itself.",
    "backend": "Backend knowledge consistency: every fact the reply states about the domain (names, prices, times, "
    "availability, reference numbers, whether an action succeeded) is supported by the tool results above. A fact no "
    "tool returned, or one a tool contradicted, scores low; a reply that states no such fact scores high.",
    "policy": "Policy compliance: the reply follows the domain policy below. It asks for what the policy requires "
    "before acting, refuses what the policy forbids, and does not claim an action that was not taken.",
}
MAX_WHY = 300


class TurnJudgement(Spent):
    """One judged reply: ``turn`` is its index in the conversation record's ``messages``; a score is ``None`` where
    the dimension was not judged (no policy) or the judgement failed (``error`` says why). ``judge`` and
    ``prompt_version`` name who judged it under which prompt (a line without them predates their recording)."""

    task_id: str
    trial: int = 0
    turn: int
    judge: str | None = None
    prompt_version: str | None = None
    cost: float = 0.0
    scores: dict[str, int | None] = Field(default_factory=dict)
    why: dict[str, str] = Field(default_factory=dict)
    error: str | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return self.task_id, self.trial, self.turn


def _line(message: Message) -> list[str]:
    """A message as the judge reads it: who said or did what."""
    out = []
    if message.role == "user":
        out.append(f"USER: {message.content or ''}")
    elif message.role == "assistant":
        if message.content:
            out.append(f"AGENT: {message.content}")
        for call in message.tool_calls or []:
            out.append(f"AGENT CALLS {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
    elif message.role == "tool":
        out.append(f"TOOL RESULT: {message.content or ''}")
    return out


def judge_messages(context: list[Message], reply: Message, policy: str | None) -> list[Message]:
    """The chat a judge answers for one reply (``context``: the conversation before it)."""
    dimensions = {name: text for name, text in DIMENSIONS.items() if policy or name != "policy"}
    rubric = "\n".join(f"- {name}: {text}" for name, text in dimensions.items())
    answer = ", ".join(f'"{name}": {{"score": <{LOW}-{HIGH}>, "why": "<one sentence>"}}' for name in dimensions)
    instructions = (
        "You grade one reply of a customer-service agent that works through tools. Score each dimension from "
        f"{LOW} (bad) to {HIGH} (good), judging only the reply marked REPLY TO GRADE, in its place in the "
        f"conversation.\n{rubric}\nAnswer with one JSON object and nothing else: {{{answer}}}"
    )
    transcript = [line for m in context for line in _line(m)]
    parts = ["CONVERSATION SO FAR:", *(transcript or ["(nothing yet)"]), "", f"REPLY TO GRADE: {reply.content or ''}"]
    if policy:
        parts += ["", "DOMAIN POLICY:", policy]
    return [system(instructions), user("\n".join(parts))]


def judge_grammar(with_policy: bool) -> str:
    """A Lark grammar (llguidance's ``%json``) that admits exactly the answer the prompt asks for."""
    item = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": LOW, "maximum": HIGH},
            "why": {"type": "string", "maxLength": MAX_WHY},
        },
        "required": ["score", "why"],
        "additionalProperties": False,
    }
    names = [n for n in DIMENSIONS if with_policy or n != "policy"]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": dict.fromkeys(names, item),
        "required": names,
        "additionalProperties": False,
    }
    return f"start: %json {json.dumps(schema)}"


def prompt_version() -> str:
    """``PROMPT_LABEL`` and a hash of the prompts (with and without a policy) and grammars, rendered for a fixed
    conversation that holds every kind of message the judge reads."""
    call = ToolCall(id="c1", name="{tool}", arguments={"{argument}": "{value}"})
    context = [user("{user}"), assistant("{agent}", [call]), tool_result("c1", "{result}")]
    rendered = [
        [m.content for m in judge_messages(context, assistant("{reply}"), policy)] for policy in ("{policy}", None)
    ]
    text = json.dumps([rendered, judge_grammar(True), judge_grammar(False)], ensure_ascii=False)
    return f"{PROMPT_LABEL}+{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


PROMPT_VERSION = prompt_version()
