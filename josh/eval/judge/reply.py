"""One reply judged on its own, outside an evaluation folder: the rubric prompt (``rubric``), answered greedily under
the grammar where asked, read by ``parse``. Extraction's judge gate (``josh.harvest.judge_gate``) takes it as its
``ReplyJudge``, with the domain policy bound (``reply_judge``); a failed request or an unusable answer is a judgement
with ``error`` set, never an exception."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from josh.core.llm import LLM
from josh.envs import build_env
from josh.eval.judge.rubric import PROMPT_VERSION, TurnJudgement
from josh.eval.judge.runner import MAX_JUDGE_TOKENS, judge_turn, policy_of
from josh.types import Message
from josh.util.layout import ROLLOUT_STATS


async def judge_reply(
    llm: LLM,
    context: list[Message],
    reply: Message,
    policy: str | None,
    grammar: bool,
    max_tokens: int = MAX_JUDGE_TOKENS,
) -> TurnJudgement:
    """Scores of ``reply`` after ``context`` (its ``turn``: the reply's index, ``len(context)``), the judge's answer
    at most ``max_tokens`` long."""
    out = TurnJudgement(task_id="", turn=len(context), prompt_version=PROMPT_VERSION)
    return await judge_turn(llm, context, reply, policy, grammar, out, max_tokens)


@dataclass(frozen=True)
class BoundJudge:
    """``judge_reply`` against ``policy`` (``None``: the policy dimension is not judged), as the gate's
    ``ReplyJudge``."""

    policy: str | None
    grammar: bool
    max_tokens: int = MAX_JUDGE_TOKENS
    prompt_version: str = PROMPT_VERSION

    async def __call__(self, llm: LLM, context: list[Message], reply: Message) -> TurnJudgement:
        return await judge_reply(llm, context, reply, self.policy, self.grammar, self.max_tokens)


def reply_judge(policy: str | None, grammar: bool, max_tokens: int = MAX_JUDGE_TOKENS) -> BoundJudge:
    """``judge_reply`` against ``policy`` (``None``: the policy dimension is not judged)."""
    return BoundJudge(policy, grammar, max_tokens)


def rollout_policy(folder: Path) -> str | None:
    """The domain policy of the environment a rollout folder's ``stats.json`` names (``None``: none named)."""
    try:
        run = json.loads((folder / ROLLOUT_STATS).read_text(encoding="utf-8")).get("run")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(run, dict) or not run.get("env"):
        return None
    return policy_of(build_env(run["env"], run.get("data") or "mini"))
