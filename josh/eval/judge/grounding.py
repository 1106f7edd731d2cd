"""A rule-based backend-knowledge check, beside the LLM judge: the entities a reply states (capitalised names,
codes such as train IDs and reference numbers, numbers such as times, prices and phone numbers) that appear in no
tool result, no tool call's arguments and no user message before it (a booking's result confirms the arguments it
was made with). A reply with such an entity is inconsistent. The rule cannot see
lowercase names or claims without an entity ("it is booked"); its agreement with human labels is reported beside the
judge's by ``josh judge --calibrate``."""

from __future__ import annotations

import json
import re

from josh.types import Message

CODE = re.compile(r"\b(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{5,}\b")
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.:]\d+)?(?![\w])")
NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|\n)$")
COMMON = frozenset(
    [
        "i",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "sure",
        "yes",
        "no",
        "great",
        "hello",
        "hi",
        "sorry",
        "ok",
        "okay",
    ]
)


def sources(context: list[Message]) -> str:
    """What a reply may draw on: tool results, tool call arguments and the user's messages, lowercased."""
    texts = [m.content or "" for m in context if m.role in ("tool", "user")]
    texts += [json.dumps(c.arguments, ensure_ascii=False) for m in context for c in m.tool_calls or ()]
    return "\n".join(texts).lower()


def entities(text: str) -> list[str]:
    """The checkable entities in a reply: codes, numbers, and capitalised names not opening a sentence."""
    found = [m.group() for m in CODE.finditer(text)]
    found += [m.group() for m in NUMBER.finditer(text) if not any(m.group() in code for code in found)]
    for m in NAME.finditer(text):
        words = m.group().split()
        if SENTENCE_START.search(text[: m.start()]):
            words = words[1:]
        name = " ".join(w for w in words if w.lower() not in COMMON)
        if name:
            found.append(name)
    return found


def _grounded(entity: str, known: str) -> bool:
    if entity[0].isdigit() and entity.replace(".", "").replace(":", "").isdigit():
        return re.search(rf"(?<![\d.]){re.escape(entity)}(?![\d])", known) is not None
    return entity.lower() in known


def ungrounded(context: list[Message], reply: str) -> list[str]:
    """The entities of ``reply`` found nowhere in ``sources(context)``."""
    known = sources(context)
    return [e for e in entities(reply) if not _grounded(e, known)]
