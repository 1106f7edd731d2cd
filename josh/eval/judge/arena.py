"""Dialogue-level pairwise comparison of finished evaluations (``josh arena``), after TD-Eval's arena (Acikgoz et al.,
2025): the runs being compared, the judge's prompt and grammar, reading its verdict, and one verdict's record.

Each run folder is one model, labelled by its folder name (the shortest path ending that tells them apart). The runs
must have evaluated the same environment and data; they are compared on the (task, trial) conversations all of them
have. For two models and one such conversation the judge reads both whole conversations (the user's messages, the
agent's replies, every tool call and what the tool returned) and the domain's policy, and says which agent served the
user better: A, B or equal, with one sentence why. Every pair is judged in both orders, so a judge's liking for the
first or second place cancels out, and how often the two orders disagree is counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from josh.core.llm import Spent
from josh.eval.evaluate import load_finished
from josh.eval.judge.parse import JudgeOutputError, first_object
from josh.eval.judge.rubric import MAX_WHY
from josh.run.conversation import ConversationRecord
from josh.types import Message, system, user
from josh.util.layout import RESULTS, SUMMARY

PROMPT_VERSION = "josh-arena-1"
Verdict = Literal["A", "B", "equal"]
VERDICTS: tuple[Verdict, ...] = ("A", "B", "equal")
_SYNONYMS: dict[str, Verdict] = {"a": "A", "b": "B", "equal": "equal", "tie": "equal", "same": "equal"}
Key = tuple[str, int]


class ArenaJudgement(Spent):
    """One ordered pair judged: model ``a``'s conversation shown as A, model ``b``'s as B; ``verdict`` is ``None``
    when the judgement failed (``error`` says why)."""

    task_id: str
    trial: int = 0
    a: str
    b: str
    verdict: Verdict | None = None
    why: str = ""
    error: str | None = None
    cost: float = 0.0

    @property
    def key(self) -> tuple[str, int, str, str]:
        return self.task_id, self.trial, self.a, self.b

    @property
    def winner(self) -> str | None:
        """The better model's label (``None``: equal, or failed)."""
        return {"A": self.a, "B": self.b}.get(self.verdict or "")

    @property
    def score(self) -> float:
        """1 when ``a`` won, 0.5 for equal, 0 when ``b`` won (a failed judgement has no score)."""
        if self.verdict is None:
            raise ValueError(f"judgement of {self.key} failed: {self.error}")
        return {"A": 1.0, "equal": 0.5, "B": 0.0}[self.verdict]


@dataclass
class ArenaRun:
    """One run folder being compared: its label, environment and conversations by (task, trial)."""

    label: str
    path: Path
    env: str
    data: str
    records: dict[Key, ConversationRecord]


def run_labels(paths: Sequence[Path]) -> list[str]:
    """Each folder's name, or as many of its last path parts as it takes to tell the folders apart."""
    parts = [p.resolve().parts for p in paths]
    for depth in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    raise ValueError("the same run folder is given twice: " + ", ".join(str(p) for p in paths))


def _run_info(path: Path) -> dict[str, str]:
    if not (path / RESULTS).is_file():
        raise FileNotFoundError(f"no conversations in {path}: run `josh eval --out {path}` first")
    try:
        info = json.loads((path / SUMMARY).read_text(encoding="utf-8")).get("run")
    except (OSError, ValueError, AttributeError):
        info = None
    if not isinstance(info, dict) or not info.get("env"):
        raise ValueError(f"{path} names no environment (no {SUMMARY} with run info): rerun `josh eval --out {path}`")
    return info


def load_runs(paths: Sequence[str | Path]) -> list[ArenaRun]:
    """The runs to compare; a folder without conversations, or runs of different environments or data, is an error."""
    folders = [Path(p) for p in paths]
    if len(folders) < 2:
        raise ValueError("the arena needs at least two run folders to compare")
    runs = []
    for label, folder in zip(run_labels(folders), folders, strict=True):
        info = _run_info(folder)
        records = {(r.task_id, r.trial): r for r in load_finished(folder)}
        if not records:
            raise FileNotFoundError(f"no conversations in {folder}: run `josh eval --out {folder}` first")
        runs.append(ArenaRun(label, folder, info["env"], info.get("data") or "mini", records))
    settings = {(r.env, r.data) for r in runs}
    if len(settings) > 1:
        named = ", ".join(f"{r.label}: {r.env}/{r.data}" for r in runs)
        raise ValueError(f"the runs evaluated different environments or data ({named}): compare runs of one setting")
    return runs


def shared_keys(runs: Sequence[ArenaRun]) -> list[Key]:
    """The (task, trial) conversations every run has, in order."""
    keys = set(runs[0].records)
    for run in runs[1:]:
        keys &= run.records.keys()
    return sorted(keys)


def transcript(record: ConversationRecord) -> list[str]:
    """A whole conversation as the judge reads it, one line per thing said or done."""
    lines = []
    for m in record.messages:
        if m.role == "user":
            lines.append(f"USER: {m.content or ''}")
        elif m.role == "assistant":
            lines += [f"AGENT: {m.content}"] if m.content else []
            lines += [
                f"AGENT CALLS {c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in m.tool_calls or []
            ]
        elif m.role == "tool":
            lines.append(f"TOOL RESULT: {m.content or ''}")
    return lines or ["(nothing was said)"]


def arena_messages(a: ConversationRecord, b: ConversationRecord, policy: str | None) -> list[Message]:
    """The chat a judge answers to compare two conversations of the same task."""
    instructions = (
        "You compare two conversations in which a customer-service agent that works through tools serves a customer "
        "with the same request. Decide which agent served the customer better: it did what the customer asked, "
        "correctly and completely; every fact it stated came from its tool results; it followed the domain policy; "
        "and it was clear and did not waste the customer's time. Judge the agents, not the customer. Neither the "
        "order of the conversations nor their length makes one better. Answer equal when neither is better.\n"
        'Answer with one JSON object and nothing else: {"winner": "A" or "B" or "equal", "why": "<one sentence>"}'
    )
    parts = ["CONVERSATION A:", *transcript(a), "", "CONVERSATION B:", *transcript(b)]
    if policy:
        parts += ["", "DOMAIN POLICY:", policy]
    return [system(instructions), user("\n".join(parts))]


def arena_grammar() -> str:
    """A Lark grammar (llguidance's ``%json``) that admits exactly the verdict the prompt asks for."""
    schema = {
        "type": "object",
        "properties": {"winner": {"enum": list(VERDICTS)}, "why": {"type": "string", "maxLength": MAX_WHY}},
        "required": ["winner", "why"],
        "additionalProperties": False,
    }
    return f"start: %json {json.dumps(schema)}"


def parse_verdict(text: str) -> tuple[Verdict, str]:
    """(verdict, reason) from a judge's answer; ``JudgeOutputError`` when it names no winner."""
    answer = first_object(text)
    if "winner" not in answer:
        raise JudgeOutputError("winner: missing from the judge's answer")
    value = answer["winner"]
    verdict = _SYNONYMS.get(value.strip().lower()) if isinstance(value, str) else None
    if verdict is None:
        raise JudgeOutputError(f"winner: {str(value)[:40]!r} is not A, B or equal")
    return verdict, str(answer.get("why") or "")[:MAX_WHY]
