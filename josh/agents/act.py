"""The ACT protocol: one JSON action per output and no thoughts; speaking is the ``respond`` action.

Results come back as a ``user`` message starting with ``Observation:`` (text protocol, no native tool calls).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from josh.agents.grammar import call_schema
from josh.agents.prompting import dump
from josh.agents.protocol import AgentProtocol
from josh.core.llm import Completion
from josh.core.parsing import Parsed, malformed, on_clean_text, read_call, unfence
from josh.types import ToolCall

RESPOND_ACTION = "respond"
RESULT_PREFIX = "Observation:"
_ACTION = re.compile(r"^[ \t]*Action[ \t]*:", re.MULTILINE | re.IGNORECASE)


def parse_act(text: str) -> Parsed:
    """Read one ``Action: {"name": ..., "arguments": {...}}``; the ``respond`` action speaks its ``content``."""
    return on_clean_text(text, _act)


def _act(text: str) -> Parsed:
    match = _ACTION.search(text)
    body = text[match.end() :] if match else unfence(text)
    if not match and not body.strip().startswith("{"):
        return malformed(text.strip(), 'no action found: write Action: {"name": ..., "arguments": {...}}')
    read, end = read_call(body)
    acted = "Action: " + body[:end].strip()
    dropped = body[end:].strip()
    if not read.ok:
        return Parsed(acted, (read,), error=read.error, problem=read.problem, dropped=dropped)
    if read.call.name != RESPOND_ACTION:
        return Parsed(acted, (read,), dropped=dropped)
    content = read.call.arguments.get("content") if isinstance(read.call.arguments, dict) else None
    if not isinstance(content, str) or not content.strip():
        return malformed(acted, 'the respond action needs a non-empty "content" string')
    return Parsed(acted, reply=content.strip(), dropped=dropped)


def act_grammar(tools: list[dict[str, Any]]) -> str:
    """One ACT output: ``Action: {"name": ..., "arguments": {...}}``, a tool call or the respond action."""
    return f'start: "Action: " call\ncall: %json {json.dumps(call_schema(tools, respond=RESPOND_ACTION))}\n'


class ActProtocol(AgentProtocol):
    """``Action: {"name": ..., "arguments": {...}}``, one per output; see the module docstring."""

    name = "act"
    result_prefix = RESULT_PREFIX

    def parse(self, completion: Completion, *, max_calls: int = 3) -> Parsed:
        return parse_act(completion.text)

    def call_texts(self, calls: Sequence[ToolCall]) -> list[str]:
        return [f"Action: {dump({'name': c.name, 'arguments': c.arguments})}" for c in calls]

    def reply_text(self, reply: str) -> str:
        return f"Action: {dump({'name': RESPOND_ACTION, 'arguments': {'content': reply}})}"

    def grammar(self, tools: list[dict[str, Any]]) -> str | None:
        return act_grammar(tools)

    def result_texts(self, content: str) -> list[str] | None:
        """One call per output, so the whole message (after the prefix) is its one result."""
        if not content.startswith(RESULT_PREFIX):
            return None
        return [content[len(RESULT_PREFIX) :].strip()]
