"""The judge gate of extraction (``extract.judge``): an LLM judge scores every agent reply with text on a tree's
ideal path (TD-Eval's turn-level dimensions) before its turn becomes training data; a turn scored below
``threshold`` on any judged dimension fails the gate. Turns that only call tools are not judged: their calls and
results are the context of the reply that follows.

An SFT row is one whole conversation whose every assistant message carries loss (TRL's assistant-only loss; a row
has no per-turn train flag to mask one turn with), so a failed turn is dropped from SFT by cutting the conversation
just before that turn: the row keeps the turns before it, and a path whose first agent turn failed gives no SFT row.
Per-turn rows follow the turn itself: a failed turn is never a KTO desirable completion nor a DPO chosen one, and
with ``route: kto`` it becomes a KTO undesirable completion.

A judge failure (a request error, an answer without usable scores) keeps the turn and is counted; a rerun asks
again. Verdicts are appended to ``judge_gate.jsonl`` in the output folder as they arrive, keyed by the judge, its
prompt version and the reply with its context, so a rerun (or a killed run resumed) judges only what it has not
judged yet, and a changed judge prompt judges everything afresh.

The scoring itself (the rubric prompt and the reading of the answer) lives in the evaluation layer, which harvest
may not import: callers pass it in as a ``ReplyJudge`` (``josh.eval.judge.reply.reply_judge``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from josh.core.llm import LLM, LLMError, run_with_llms
from josh.llm.health import stop_if_failing
from josh.run.components import build_llms, check_llms
from josh.run.spec import JudgeSpec
from josh.search.tree import Node, Tree, path_messages
from josh.types import Message
from josh.util.jsonl import read_models, write_as_completed
from josh.util.layout import JUDGE_GATE


class JudgeGate(JudgeSpec):
    """``extract.judge``: the LLM that judges ideal-path replies, and what becomes of a turn that fails."""

    threshold: int = Field(3, ge=1, le=5, description="a turn scored below this on any judged dimension fails")
    route: Literal["drop", "kto"] = Field(
        "drop", description="a failed turn is left out of SFT (drop), and also becomes a KTO undesirable row (kto)"
    )


class Judged(Protocol):
    """What a reply judge answers: a score per dimension (``None``: not judged), or why judging failed."""

    scores: dict[str, int | None]
    error: str | None


class ReplyJudge(Protocol):
    """Scores one reply after its context with an LLM; ``prompt_version`` names the prompt it asks under."""

    prompt_version: str

    def __call__(self, llm: LLM, context: list[Message], reply: Message, /) -> Awaitable[Judged]: ...


class GateVerdict(BaseModel):
    """One judged reply (a ``judge_gate.jsonl`` line); ``message`` is its index in its node's messages."""

    key: str
    judge: str
    prompt_version: str | None = None
    task_id: str
    node: int
    message: int
    scores: dict[str, int | None] = Field(default_factory=dict)
    error: str | None = None

    def fails(self, threshold: int) -> bool:
        """Scored below ``threshold`` on a judged dimension (a failed judgement never fails the gate)."""
        return self.error is None and any(s is not None and s < threshold for s in self.scores.values())


class GateStats(BaseModel):
    """What the gate did (``gate`` in ``extract_stats.json``): ideal-path replies looked at, judged now or found in
    the cache, judgements that failed (turn kept); turns that failed the gate (removed from SFT and KTO desirable),
    of those the ones routed to KTO as undesirable, and passing turns the SFT cut left out."""

    judge: str = ""
    replies: int = 0
    judged: int = 0
    cached: int = 0
    failed: int = 0
    removed: int = 0
    to_kto: int = 0
    cut: int = 0


@dataclass(frozen=True)
class Reply:
    """One ideal-path reply to judge: the conversation before it and the reply."""

    key: str
    task_id: str
    node: int
    message: int
    context: list[Message]
    reply: Message


def reply_key(context: list[Message], reply: Message) -> str:
    """Identity of a reply in its context."""
    text = json.dumps([m.to_openai() for m in [*context, reply]], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def node_replies(tree: Tree, node: Node) -> list[Reply]:
    """The agent messages with text of one agent turn, each with the conversation before it."""
    before = path_messages(tree, node.parent or 0, with_system=False)
    out = []
    for i, message in enumerate(node.messages):
        if message.role == "assistant" and (message.content or "").strip():
            context = [*before, *node.messages[:i]]
            out.append(Reply(reply_key(context, message), tree.task_id, node.id, i, context, message))
    return out


def path_replies(tree: Tree, path: list[Node]) -> list[Reply]:
    """The replies of every agent turn of a root-first path."""
    return [r for node in path[1:] for r in node_replies(tree, node)]


def gate_cut(path: list[Node], failed: set[int]) -> int:
    """How many nodes of ``path`` the SFT row keeps: those before its first turn in ``failed``."""
    return next((i for i, node in enumerate(path) if node.id in failed), len(path))


def failed_turns(tree: Tree, path: list[Node], failing: set[str], stats: GateStats | None) -> set[int]:
    """Ids of the turns of ``path`` with a reply in ``failing``; their count, and the passing turns the SFT cut
    leaves out, go into ``stats``."""
    failed = {node.id for node in path[1:] if any(r.key in failing for r in node_replies(tree, node))}
    if stats is not None:
        stats.removed += len(failed)
        stats.cut += sum(1 for node in path[gate_cut(path, failed) :] if node.id not in failed)
    return failed


def load_verdicts(path: Path) -> list[GateVerdict]:
    return list(read_models(path, GateVerdict, "a judge verdict", repair=True)) if path.is_file() else []


async def _judge_all(
    replies: list[Reply], gate: JudgeGate, judge: ReplyJudge, llm: LLM, out: Path
) -> list[GateVerdict]:
    async def one(r: Reply) -> GateVerdict:
        verdict = GateVerdict(
            key=r.key, judge=gate.name, prompt_version=judge.prompt_version, task_id=r.task_id, node=r.node,
            message=r.message,
        )  # fmt: skip
        try:
            judged = await judge(llm, r.context, r.reply)
        except (LLMError, ValueError) as exc:
            verdict.error = f"judge failed: {exc}"
            return verdict
        verdict.scores, verdict.error = dict(judged.scores), judged.error
        return verdict

    return await write_as_completed(out, (one(r) for r in replies), gate.concurrency, lambda: stop_if_failing([llm]))


def _judge(replies: list[Reply], gate: JudgeGate, judge: ReplyJudge, out: Path, llm: LLM | None) -> list[GateVerdict]:
    """Judge ``replies`` with ``llm``, or with the LLM ``gate`` names (built here, closed after)."""
    if llm is not None:
        return asyncio.run(_judge_all(replies, gate, judge, llm, out))
    key, settings = gate.llm_key()
    llms = build_llms(check_llms({key: settings}))
    try:
        return run_with_llms(list(llms.values()), _judge_all(replies, gate, judge, llms[key], out))
    finally:
        for built in llms.values():
            built.close()


def run_gate(
    replies: list[Reply], gate: JudgeGate, judge: ReplyJudge, out_dir: Path, stats: GateStats, *, llm: LLM | None = None
) -> set[str]:
    """The keys of the replies that fail the gate. Replies the cache in ``out_dir`` holds a verdict of this judge
    under this prompt version for are not judged again; new verdicts are appended to it."""
    out = out_dir / JUDGE_GATE
    version = judge.prompt_version
    cached = {
        v.key: v for v in load_verdicts(out) if v.judge == gate.name and v.prompt_version == version and v.error is None
    }
    todo = list({r.key: r for r in replies if r.key not in cached}.values())
    stats.judge, stats.replies = gate.name, len(replies)
    stats.cached = sum(1 for r in replies if r.key in cached)
    new = _judge(todo, gate, judge, out, llm) if todo else []
    stats.judged, stats.failed = len(new), sum(1 for v in new if v.error is not None)
    verdicts = {**cached, **{v.key: v for v in new}}
    return {key for key, v in verdicts.items() if v.fails(gate.threshold)}
