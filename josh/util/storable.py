"""Keeping whatever a model writes storable as UTF-8 JSON records.

Three things in model output cannot be written to a ``.jsonl`` file or read back: lone surrogates (a JSON escape
such as ``\\ud800`` decodes to one), nesting deeper than the serialisers allow, and numbers that Python will not
print (more than 4,300 digits) or that JSON has no word for (``NaN``, ``Infinity``). Readers of model output call
``clean_text`` and ``json_problem`` at the boundary and record ``ErrorCategory.UNSTORABLE``; ``to_storable`` is the
writer's last resort for anything that slipped through.
"""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from typing import Any

from pydantic import BaseModel

MAX_DEPTH = 64
"""Deepest JSON nesting accepted in tool-call arguments (records wrap them in about ten more levels)."""

RECORD_DEPTH = 100
"""Deepest nesting ``to_storable`` keeps in a whole record; anything below is replaced by a marker string."""

MAX_INT_BITS = 14_000
"""Integers wider than this (about 4,200 decimal digits) are past what Python converts to text by default."""

TOO_DEEP = "<nested too deeply>"


def _refuse_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
"""Reads model JSON, refusing ``NaN`` and ``Infinity``; raises ``ValueError`` (also for numbers over 4,300
digits) or ``RecursionError`` (nesting past the interpreter's limit), never anything else on a string."""


def read_json(text: str) -> Any:
    """One JSON document read with ``DECODER``."""
    return DECODER.decode(text)


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a high/low pair is joined into its character)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def is_clean(text: str) -> bool:
    """Whether ``text`` encodes to UTF-8 as it is."""
    return clean_text(text) is text


def json_problem(value: Any, *, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a decoded JSON value cannot be stored as it is (a sentence), or ``None`` when it can."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                return f"it is nested more than {max_depth} levels deep"
            if isinstance(item, dict):
                if not all(is_clean(k) for k in item if isinstance(k, str)):
                    return "a key holds a lone surrogate escape (\\ud800 to \\udfff)"
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            if not is_clean(item):
                return "a string holds a lone surrogate escape (\\ud800 to \\udfff)"
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is not finite"
        elif isinstance(item, int) and item.bit_length() > MAX_INT_BITS:
            return "a number is too long"
    return None


def to_storable(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value`` (pydantic models, dataclasses, enums included) with text cleaned, nesting
    past ``RECORD_DEPTH`` replaced by a marker, over-long integers written as a note and non-finite floats as null."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Enum):
        return to_storable(value.value, depth)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= MAX_INT_BITS else f"<integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= RECORD_DEPTH:
        return TOO_DEEP
    if isinstance(value, BaseModel):
        return {name: to_storable(getattr(value, name), depth + 1) for name in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_storable(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {clean_text(str(k)): to_storable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_storable(v, depth + 1) for v in value]
    return clean_text(str(value))
