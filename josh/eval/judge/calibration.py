"""How far to trust a judge: ``josh judge --calibrate`` runs it on a fixed set of hand-labelled turns shipped with
josh (``calibration.jsonl``: replies in mini ToolWOZ conversations, good ones, invented entities, premature bookings
and off-topic replies, each labelled good or bad per dimension) and reports per dimension the accuracy of its
thresholded scores (``GOOD_AT`` and above: good) and Cohen's kappa, which is 0 for a judge no better than chance
(e.g. one that always answers the same) and 1 for perfect agreement. The rule-based check of ``grounding`` is scored
against the backend labels beside it. A failed judgement is counted, and left out of the agreement.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

from josh.core.llm import LLM, run_with_llms
from josh.envs.toolwoz.policy import POLICY
from josh.eval.judge.grounding import ungrounded
from josh.eval.judge.rubric import DIMENSIONS, PROMPT_VERSION, TurnJudgement
from josh.eval.judge.runner import MAX_JUDGE_TOKENS, judge_turn
from josh.eval.judge.session import build_judge
from josh.run.spec import JudgeSpec
from josh.types import Message, ToolCall, assistant, call_id, tool_result, user

GOOD_AT = 4
RULE = "rule: entities in no tool result"
Label = Literal["good", "bad"]


class CalibrationItem(BaseModel):
    """One hand-labelled turn: the conversation before it (``{"user": ...}``, ``{"agent": ...}`` or ``{"call": name,
    "arguments": {...}, "result": ...}`` steps), the reply, and a label per dimension."""

    id: str
    kind: str
    context: list[dict[str, Any]]
    reply: str
    labels: dict[str, Label]

    def messages(self) -> list[Message]:
        """The context as chat messages."""
        out = []
        for step in self.context:
            if "user" in step:
                out.append(user(step["user"]))
            elif "agent" in step:
                out.append(assistant(step["agent"]))
            else:
                call = ToolCall(name=step["call"], arguments=step.get("arguments") or {}, id=call_id(len(out)))
                out += [assistant(calls=[call]), tool_result(call.id, step.get("result", ""))]
        return out


class Agreement(BaseModel):
    """A judge's agreement with the labels of one dimension."""

    n: int = 0
    accuracy: float | None = None
    kappa: float | None = Field(None, description="Cohen's kappa; None when it is undefined (one class only)")
    failed: int = 0


class CalibrationReport(BaseModel):
    """What ``josh judge --calibrate`` prints."""

    judge: str
    prompt_version: str = PROMPT_VERSION
    items: int
    failed: int
    agreement: dict[str, Agreement]
    rule: Agreement


def load_calibration(path: str | Path | None = None) -> list[CalibrationItem]:
    """The shipped calibration set (or the one at ``path``)."""
    text = (
        Path(path).read_text(encoding="utf-8")
        if path
        else resources.files("josh.eval.judge").joinpath("calibration.jsonl").read_text(encoding="utf-8")
    )
    return [CalibrationItem.model_validate_json(line) for line in text.splitlines() if line.strip()]


def agreement(pairs: list[tuple[bool, bool]], failed: int = 0) -> Agreement:
    """Accuracy and Cohen's kappa of (predicted good, labelled good) pairs."""
    n = len(pairs)
    if not n:
        return Agreement(failed=failed)
    observed = sum(p == t for p, t in pairs) / n
    predicted, labelled = sum(p for p, _ in pairs) / n, sum(t for _, t in pairs) / n
    chance = predicted * labelled + (1 - predicted) * (1 - labelled)
    kappa = None if chance == 1 else (observed - chance) / (1 - chance)
    return Agreement(n=n, accuracy=observed, kappa=kappa, failed=failed)


async def calibrate_llm(
    llm: LLM,
    *,
    judge: str,
    items: list[CalibrationItem],
    policy: str | None,
    grammar: bool = True,
    concurrency: int = 8,
    max_tokens: int = MAX_JUDGE_TOKENS,
) -> CalibrationReport:
    """Judge every calibration item with ``llm`` and measure its agreement with the labels."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: CalibrationItem) -> TurnJudgement:
        async with gate:
            out = TurnJudgement(task_id=item.id, turn=len(item.messages()), judge=judge, prompt_version=PROMPT_VERSION)
            return await judge_turn(llm, item.messages(), assistant(item.reply), policy, grammar, out, max_tokens)

    judged = await asyncio.gather(*(one(item) for item in items))
    failed = sum(j.error is not None for j in judged)
    dims = {}
    for name in DIMENSIONS:
        pairs = [
            (j.scores[name] >= GOOD_AT, item.labels[name] == "good")
            for item, j in zip(items, judged, strict=True)
            if name in item.labels and j.scores.get(name) is not None
        ]
        dims[name] = agreement(pairs, failed)
    rule = [(not ungrounded(item.messages(), item.reply), item.labels["backend"] == "good") for item in items]
    return CalibrationReport(
        judge=judge, items=len(items), failed=failed, agreement=dims, rule=agreement(rule)
    )  # fmt: skip


def calibrate(spec: JudgeSpec, items: list[CalibrationItem] | None = None) -> CalibrationReport:
    """Run ``spec``'s judge on the calibration set (ToolWOZ's policy for the policy dimension)."""
    llm = build_judge(spec)

    work = calibrate_llm(
        llm, judge=spec.name, items=items or load_calibration(), policy=POLICY, grammar=spec.uses_grammar,
        concurrency=spec.concurrency, max_tokens=spec.max_tokens,
    )  # fmt: skip
    try:
        return run_with_llms([llm], work)
    finally:
        llm.close()


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def print_calibration(report: CalibrationReport, console: Console | None = None) -> None:
    """Agreement per dimension, the rule check beside the backend dimension."""
    table = Table(title=f"judge {report.judge} on {report.items} labelled turns ({report.failed} failed)")
    for column in ("dimension", "judged", f"accuracy (score >= {GOOD_AT} = good)", "Cohen's kappa"):
        table.add_column(column)
    for name, a in report.agreement.items():
        table.add_row(name, str(a.n), _cell(a.accuracy), _cell(a.kappa))
    table.add_row(RULE, str(report.rule.n), _cell(report.rule.accuracy), _cell(report.rule.kappa))
    (console or Console()).print(table)
