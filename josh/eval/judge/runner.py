"""Judge every agent reply of a finished evaluation (``josh judge RUN_DIR``): one ``TurnJudgement`` per reply in
``judgements.jsonl``, appended as they finish, so a killed run resumes where it stopped; then ``judge_summary.json``
with each dimension's mean score and a bootstrap 95% interval over tasks.

A reply is an agent message with text for the user (a turn that only calls tools is not judged; its calls and their
results are part of the next reply's context). The judge runs greedy, under ``judge_grammar`` where the backend
takes grammars (``grammar=False`` for one that does not, such as OpenAI's API). A failed request or an answer without
usable scores is a judgement with ``error`` set: counted, never fatal; rerunning retries it. A reply whose judge
prompt outgrows the judge model's context is a judgement too (``error`` starting ``judge_context_length``): counted
apart (``overflowed``), never retried, never toward the judge's backend being down. Each judgement names its
judge and prompt version: a rerun with another judge (or a changed prompt) judges every reply afresh, and the summary
reads only the named judge's judgements.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from josh.core.env import Env
from josh.core.llm import LLM, ContextLengthError, LLMError, Sampling, Spent
from josh.eval.evaluate import load_finished
from josh.eval.judge.parse import JudgeOutputError, parse_judgement
from josh.eval.judge.rubric import DIMENSIONS, PROMPT_VERSION, TurnJudgement, judge_grammar, judge_messages
from josh.eval.metrics import Interval, bootstrap
from josh.llm.health import stop_if_failing
from josh.run.conversation import ConversationRecord
from josh.run.info import RunInfo
from josh.run.spec import JudgeSpec
from josh.run.step import JUDGE_CONTEXT_LENGTH
from josh.types import Message
from josh.util.atomic import write_atomic
from josh.util.jsonl import read_models, write_as_completed
from josh.util.layout import JUDGE_SUMMARY, JUDGEMENTS, RESULTS

MAX_JUDGE_TOKENS: int = JudgeSpec.model_fields["max_tokens"].default


class JudgeSummary(Spent):
    """What ``judge_run`` measured: per dimension the mean score over judged replies (bootstrap over tasks), how many
    replies were judged, failed, or had a dimension that does not apply (no policy); the judge's own calls, tokens,
    cost and the last session's wall time, apart from the agent's and the user's; ``run``: the judging's provenance."""

    judge: str
    prompt_version: str = PROMPT_VERSION
    cost: float = 0.0
    wall_s: float = 0.0
    run: RunInfo | None = None
    replies: int = 0
    failed: int = 0
    overflowed: int = Field(0, description="replies whose judge prompt outgrew the judge's context (not retried)")
    not_applicable: dict[str, int] = Field(default_factory=dict)
    scores: dict[str, Interval] = Field(default_factory=dict)


class _Job(BaseModel):
    record: ConversationRecord
    turn: int


def reply_turns(record: ConversationRecord) -> list[int]:
    """Indices in ``record.messages`` of the agent's replies to the user."""
    return [i for i, m in enumerate(record.messages) if m.role == "assistant" and (m.content or "").strip()]


def policy_of(env: Env) -> str | None:
    """The domain policy the policy dimension is judged against (None: that dimension is not judged)."""
    policy = env.policy
    return policy if isinstance(policy, str) and policy.strip() else None


def load_judgements(run_dir: Path) -> list[TurnJudgement]:
    path = run_dir / JUDGEMENTS
    return list(read_models(path, TurnJudgement, "a judgement", repair=True)) if path.is_file() else []


def by_judge(judgements: list[TurnJudgement], judge: str) -> list[TurnJudgement]:
    """The judgements ``judge`` made under the current prompt."""
    return [j for j in judgements if j.judge == judge and j.prompt_version == PROMPT_VERSION]


async def ask_judge(llm: LLM, messages: list[Message], grammar: str | None, max_tokens: int, out: Any) -> str | None:
    """The judge's greedy answer to ``messages`` (under ``grammar`` when given), its calls, tokens and cost added to
    ``out`` (a record with ``error``); ``None``, with ``out.error`` set, when the request failed."""
    sampling = Sampling(temperature=0.0, max_new_tokens=max_tokens, grammar=grammar)
    try:
        [completion] = await llm.chat(messages, sampling=sampling)
    except ContextLengthError as exc:
        out.error = f"{JUDGE_CONTEXT_LENGTH}: {exc}"
        return None
    except LLMError as exc:
        out.error = f"judge request failed: {exc}"
        return None
    out.llm_calls += 1
    out.prompt_tokens += completion.prompt_tokens
    out.completion_tokens += completion.completion_tokens
    out.cost += completion.cost
    return completion.text


async def judge_turn(
    llm: LLM,
    context: list[Message],
    reply: Message,
    policy: str | None,
    grammar: bool,
    out: TurnJudgement,
    max_tokens: int = MAX_JUDGE_TOKENS,
) -> TurnJudgement:
    """Fill ``out`` with the judge's scores of ``reply`` after ``context`` (or its error), its answer at most
    ``max_tokens`` long; never raises for a failed request or an unusable answer."""
    names = [n for n in DIMENSIONS if policy or n != "policy"]
    constraint = judge_grammar(policy is not None) if grammar else None
    out.scores = {n: None for n in DIMENSIONS}
    text = await ask_judge(llm, judge_messages(context, reply, policy), constraint, max_tokens, out)
    if text is None:
        return out
    try:
        scores, why = parse_judgement(text, names)
    except JudgeOutputError as exc:
        out.error = str(exc)
        return out
    out.scores.update(scores)
    out.why = why
    return out


async def _judge_one(
    llm: LLM, job: _Job, policy: str | None, grammar: bool, judge: str, max_tokens: int
) -> TurnJudgement:
    record, turn = job.record, job.turn
    out = TurnJudgement(
        task_id=record.task_id, trial=record.trial, turn=turn, judge=judge, prompt_version=PROMPT_VERSION
    )
    return await judge_turn(llm, record.messages[:turn], record.messages[turn], policy, grammar, out, max_tokens)


async def judge_run(
    run_dir: str | Path,
    env: Env,
    llm: LLM,
    *,
    judge: str,
    concurrency: int = 8,
    grammar: bool = True,
    max_tokens: int = MAX_JUDGE_TOKENS,
    run: RunInfo | None = None,
) -> JudgeSummary:
    """Judge every reply of ``run_dir``'s conversations that ``judge`` has not yet judged (a failed judgement is
    retried), each answer at most ``max_tokens`` long, then write and return the summary (``run``: the provenance it
    records)."""
    run_dir = Path(run_dir)
    records = load_finished(run_dir) if (run_dir / RESULTS).is_file() else []
    if not records:
        raise FileNotFoundError(f"no conversations to judge in {run_dir}: run `josh eval --out {run_dir}` first")
    start = time.perf_counter()
    previous = by_judge(load_judgements(run_dir), judge)
    done = {j.key for j in previous if j.error is None or overflowed(j)}
    jobs = [_Job(record=r, turn=t) for r in records for t in reply_turns(r) if (r.task_id, r.trial, t) not in done]
    policy = policy_of(env)
    work = (_judge_one(llm, job, policy, grammar, judge, max_tokens) for job in jobs)
    new = await write_as_completed(run_dir / JUDGEMENTS, work, concurrency, lambda: stop_if_failing([llm]))
    summary = summarize(previous + new, judge=judge)
    summary.wall_s, summary.run = round(time.perf_counter() - start, 3), run
    write_atomic(run_dir / JUDGE_SUMMARY, summary.model_dump_json(indent=2) + "\n")
    return summary


def overflowed(judgement: TurnJudgement) -> bool:
    """Whether the judge's prompt for this reply outgrew its context: a finished judgement without scores."""
    return (judgement.error or "").startswith(JUDGE_CONTEXT_LENGTH)


def latest(judgements: list[TurnJudgement]) -> dict[tuple[str, int, int], TurnJudgement]:
    """Each reply's judgement: its first successful one, else its newest failure."""
    out: dict[tuple[str, int, int], TurnJudgement] = {}
    for j in judgements:
        if j.key not in out or out[j.key].error is not None:
            out[j.key] = j
    return out


def task_scores(judgements: list[TurnJudgement]) -> dict[str, dict[str, list[float]]]:
    """Per dimension, each task's scores over its judged replies (failures and n/a left out)."""
    by_task: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for j in latest(judgements).values():
        for name in DIMENSIONS:
            score = j.scores.get(name)
            if score is not None:
                by_task[name][j.task_id].append(float(score))
    return {name: dict(tasks) for name, tasks in by_task.items()}


def summarize(judgements: list[TurnJudgement], *, judge: str) -> JudgeSummary:
    """The summary of each reply's judgement (see ``latest``)."""
    chosen = latest(judgements)
    summary = JudgeSummary(judge=judge, replies=len(chosen))
    for j in chosen.values():
        summary.overflowed += overflowed(j)
        summary.failed += j.error is not None and not overflowed(j)
        for name in DIMENSIONS:
            if j.error is None and j.scores.get(name) is None:
                summary.not_applicable[name] = summary.not_applicable.get(name, 0) + 1
    for j in judgements:
        summary.llm_calls += j.llm_calls
        summary.prompt_tokens += j.prompt_tokens
        summary.completion_tokens += j.completion_tokens
        summary.cost += j.cost
    scores = task_scores(judgements)
    summary.scores = {name: bootstrap(list(tasks.values())) for name, tasks in scores.items() if tasks}
    return summary
