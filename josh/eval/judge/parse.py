"""Reading a judge's answer: the first JSON object in its text, each dimension's score an integer in range (a bare
number or a numeric string is accepted, as is ``{"score": n}`` without a reason). Anything else (non-finite or
huge numbers, nesting past the decoder's depth included) is a ``JudgeOutputError`` naming what was wrong, which the
runner counts as a failed judgement; no answer makes it raise anything else."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from josh.eval.judge.rubric import HIGH, LOW, MAX_WHY


class JudgeOutputError(ValueError):
    """A judge's answer without a usable score."""


def first_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (prose or code fences around it are ignored); nesting too deep for the
    decoder is a ``JudgeOutputError`` at once (trying each inner brace again would take quadratic time)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except RecursionError:
            raise JudgeOutputError("the judge's answer is nested too deeply") from None
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise JudgeOutputError(f"no JSON object in the judge's answer: {text[:120]!r}")


def _score(name: str, value: Any) -> tuple[int, str]:
    why = ""
    if isinstance(value, dict):
        why = str(value.get("why") or value.get("reason") or "")[:MAX_WHY]
        if "score" not in value:
            raise JudgeOutputError(f"{name}: no score")
        value = value["score"]
    if isinstance(value, bool):
        raise JudgeOutputError(f"{name}: score {value!r} is not a number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise JudgeOutputError(f"{name}: score {value!r} is not a number") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise JudgeOutputError(f"{name}: score {value!r} is not a finite number")
    if not isinstance(value, int | float) or value != int(value):
        raise JudgeOutputError(f"{name}: score {value!r} is not a whole number")
    if not LOW <= int(value) <= HIGH:
        raise JudgeOutputError(f"{name}: score {int(value)} is outside {LOW}-{HIGH}")
    return int(value), why


def parse_judgement(text: str, dimensions: Iterable[str]) -> tuple[dict[str, int], dict[str, str]]:
    """(score, reason) per dimension from a judge's answer; ``JudgeOutputError`` when any is missing or bad."""
    answer = first_object(text)
    scores, why = {}, {}
    for name in dimensions:
        if name not in answer:
            raise JudgeOutputError(f"{name}: missing from the judge's answer")
        scores[name], why[name] = _score(name, answer[name])
    return scores, why
