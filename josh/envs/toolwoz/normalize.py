"""Value normalisation for ToolWOZ comparisons (spec: Normalisation).

Every value the environment compares (agent arguments, goal parameters, DB cells) goes through ``normalize``:
lower-case, strip, collapse inner white space, drop apostrophes, numbers as their decimal string, clock times as
zero-padded ``HH:MM``. ``is_no_constraint`` tells the values that mean "any" (``dontcare``, ``not mentioned``, ...); ``plain_text`` is the
lighter form dialogue text is matched in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

NO_CONSTRAINT = frozenset({"", "dontcare", "dont care", "do nt care", "not mentioned", "none", "any"})

_APOSTROPHES = str.maketrans("", "", "'\u2019\u2018`\u00b4")
_SPACE = re.compile(r"\s+")
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::[0-5]\d)?(?:\s*([ap])\.?m\.?)?")  # seconds are dropped
_HOUR = re.compile(r"(\d{1,2})\s*([ap])\.?m\.?")
_CACHE_LIMIT = 256


def _clock(hour: int, minute: int, half: str | None) -> str | None:
    """``HH:MM`` for a valid clock reading (``half`` is ``a``/``p`` for 12-hour input), else None."""
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "p" else 0)
    if hour > 23 or minute > 59:
        return None
    return f"{hour:02d}:{minute:02d}"


def _normalize_text(text: str) -> str:
    text = _SPACE.sub(" ", text.lower().translate(_APOSTROPHES)).strip()
    if text.isdigit() and text.isascii():
        return text.lstrip("0") or "0"
    match = _CLOCK.fullmatch(text)
    if match:
        return _clock(int(match[1]), int(match[2]), match[3]) or text
    match = _HOUR.fullmatch(text)
    if match:
        return _clock(int(match[1]), 0, match[2]) or text
    return text


_normalize_cached = lru_cache(maxsize=65536)(_normalize_text)


def normalize(value: Any) -> str:
    """The comparable form of one value: ``"King's  College "`` → ``"kings college"``, ``9:00`` and ``09:00:00`` → ``"09:00"``."""
    if type(value) is str:
        return _normalize_cached(value) if len(value) <= _CACHE_LIMIT else _normalize_text(value)
    if isinstance(value, str):
        return _normalize_text(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    return _normalize_text(str(value))


def plain_text(text: str) -> str:
    """Lower-case, apostrophes dropped, white space collapsed: the form in which the scripted agent and user match
    dialogue text (no number or clock rewriting, unlike ``normalize``)."""
    return _SPACE.sub(" ", text.lower().replace("\u2019", "'").replace("'", "")).strip()


def is_no_constraint(value: Any) -> bool:
    """Whether the value means "no constraint" (empty, ``dontcare``, ``not mentioned``, ``none``, ``any``, ...)."""
    return normalize(value) in NO_CONSTRAINT


def normalize_args(args: Mapping[str, Any]) -> dict[str, str]:
    """Normalised key → value for every argument that constrains something (no-constraint values dropped)."""
    out: dict[str, str] = {}
    for key, value in args.items():
        text = normalize(value)
        if text not in NO_CONSTRAINT:
            out[str(key)] = text
    return out


_MINUTES = {f"{h:02d}:{m:02d}": h * 60 + m for h in range(48) for m in range(60)}


def minutes(value: str) -> int | None:
    """Minutes after midnight of a normalised ``HH:MM`` time; None when the value is not one.

    Hours from 24 to 47 are accepted: MultiWOZ writes some after-midnight arrivals as ``24:08``.
    """
    return _MINUTES.get(value)


def is_subset(sub: Mapping[str, str], main: Mapping[str, str]) -> bool:
    """Every (key, value) of ``sub`` appears in ``main``; both already normalised."""
    return sub.items() <= main.items()
