"""``josh arena``: every ordered pair of runs judged on every shared conversation, resumably, then the ranking.

``arena_judgements.jsonl`` in the arena folder holds one ``ArenaJudgement`` per judged ordered pair, appended as they
finish, so a killed arena resumes where it stopped; a failed request or an answer without a verdict is a judgement
with ``error`` set, counted and judged again on the next run. The judge runs greedy, under ``arena_grammar`` where the
backend takes grammars. ``arena_summary.json`` then holds per model its Bradley-Terry strength with a bootstrap 95%
interval over tasks, its Elo and its wins, ties and losses, and ``arena.png`` plots the strengths.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.table import Table

from josh.core.llm import LLM, Spent, run_with_llms
from josh.envs import build_env
from josh.eval.judge.arena import (
    PROMPT_VERSION,
    ArenaJudgement,
    ArenaRun,
    Key,
    arena_grammar,
    arena_messages,
    parse_verdict,
    shared_keys,
)
from josh.eval.judge.parse import JudgeOutputError
from josh.eval.judge.ranking import ModelRank, Outcome, rank
from josh.eval.judge.runner import ask_judge, policy_of
from josh.eval.summary import fmt_interval
from josh.llm.health import stop_if_failing
from josh.run.components import build_llms, check_llms
from josh.util.atomic import write_atomic
from josh.util.jsonl import read_models, write_as_completed
from josh.util.layout import ARENA_JUDGEMENTS, ARENA_PLOT, ARENA_SUMMARY

MAX_VERDICT_TOKENS = 200


class ArenaSummary(Spent):
    """What ``arena_run`` measured; ``order_disagreements`` counts the conversation pairs whose two orders (both
    judged) named different winners, out of ``both_orders``. Calls and tokens are the judge's; ``max_tokens``: its
    limit per verdict."""

    judge: str
    prompt_version: str = PROMPT_VERSION
    runs: dict[str, str] = Field(default_factory=dict)
    shared: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    judgements: int = 0
    failed: int = 0
    both_orders: int = 0
    order_disagreements: int = 0
    models: dict[str, ModelRank] = Field(default_factory=dict)
    cost: float = 0.0
    max_tokens: int = MAX_VERDICT_TOKENS


class _Job(BaseModel):
    key: Key
    a: str
    b: str


def skipped_counts(runs: Sequence[ArenaRun]) -> dict[str, int]:
    """Per run, how many of its conversations are not shared by every run (and so not compared)."""
    shared = set(shared_keys(runs))
    return {run.label: len(run.records.keys() - shared) for run in runs}


def load_arena_judgements(out: Path) -> list[ArenaJudgement]:
    path = out / ARENA_JUDGEMENTS
    return list(read_models(path, ArenaJudgement, "an arena judgement", repair=True)) if path.is_file() else []


async def _judge_one(
    llm: LLM, runs: dict[str, ArenaRun], job: _Job, policy: str | None, grammar: bool, max_tokens: int
) -> ArenaJudgement:
    task_id, trial = job.key
    out = ArenaJudgement(task_id=task_id, trial=trial, a=job.a, b=job.b)
    messages = arena_messages(runs[job.a].records[job.key], runs[job.b].records[job.key], policy)
    text = await ask_judge(llm, messages, arena_grammar() if grammar else None, max_tokens, out)
    if text is None:
        return out
    try:
        out.verdict, out.why = parse_verdict(text)
    except JudgeOutputError as exc:
        out.error = str(exc)
    return out


async def arena_run(
    runs: Sequence[ArenaRun],
    out: str | Path,
    llm: LLM,
    *,
    judge: str,
    policy: str | None = None,
    concurrency: int = 8,
    grammar: bool = True,
    max_tokens: int = MAX_VERDICT_TOKENS,
) -> ArenaSummary:
    """Judge every ordered pair of ``runs`` on every shared conversation not yet judged (a failed judgement is
    retried), each verdict at most ``max_tokens`` long, then write the summary and the plot and return the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    previous = load_arena_judgements(out)
    done = {j.key for j in previous if j.error is None}
    labels = [run.label for run in runs]
    jobs = [
        _Job(key=key, a=a, b=b)
        for key in shared_keys(runs)
        for a, b in itertools.permutations(labels, 2)
        if (*key, a, b) not in done
    ]
    by_label = {run.label: run for run in runs}
    work = (_judge_one(llm, by_label, job, policy, grammar, max_tokens) for job in jobs)
    new = await write_as_completed(out / ARENA_JUDGEMENTS, work, concurrency, lambda: stop_if_failing([llm]))
    summary = summarize_arena(runs, previous + new, judge=judge)
    summary.max_tokens = max_tokens
    write_atomic(out / ARENA_SUMMARY, summary.model_dump_json(indent=2) + "\n")
    plot_arena(summary, out / ARENA_PLOT)
    return summary


def arena_session(
    runs: Sequence[ArenaRun],
    out: str | Path,
    *,
    backend: str,
    model: str,
    llm_options: dict[str, Any],
    concurrency: int = 8,
    grammar: bool = True,
    max_tokens: int = MAX_VERDICT_TOKENS,
) -> ArenaSummary:
    """``arena_run`` with the judge built from its backend, model and settings (and closed after), judging against the
    runs' domain policy. OpenAI's own API takes no grammar, so there the judge answers unconstrained."""
    settings = dict(llm_options)
    key = (backend, model, settings.pop("base_url", None))
    llms = build_llms(check_llms({key: settings}))
    policy = policy_of(build_env(runs[0].env, runs[0].data))
    grammar = grammar and not (backend == "openai" and key[2] is None)

    work = arena_run(
        runs, out, llms[key], judge=f"{backend}:{model}", policy=policy, concurrency=concurrency, grammar=grammar,
        max_tokens=max_tokens,
    )  # fmt: skip
    try:
        return run_with_llms(list(llms.values()), work)
    finally:
        for llm in llms.values():
            llm.close()


def summarize_arena(runs: Sequence[ArenaRun], judgements: Sequence[ArenaJudgement], *, judge: str) -> ArenaSummary:
    """The summary over the newest judgement of each ordered pair of these runs on their shared conversations."""
    labels = [run.label for run in runs]
    shared = set(shared_keys(runs))
    latest: dict[tuple[str, int, str, str], ArenaJudgement] = {}
    for j in judgements:
        ours = j.a in labels and j.b in labels and (j.task_id, j.trial) in shared
        if ours and (j.key not in latest or latest[j.key].error is not None):
            latest[j.key] = j
    summary = ArenaSummary(
        judge=judge, runs={run.label: str(run.path) for run in runs}, shared=len(shared),
        skipped=skipped_counts(runs), judgements=len(latest),
    )  # fmt: skip
    for j in judgements:
        summary.llm_calls += j.llm_calls
        summary.prompt_tokens += j.prompt_tokens
        summary.completion_tokens += j.completion_tokens
        summary.cost += j.cost
    ok = {key: j for key, j in latest.items() if j.error is None}
    summary.failed = len(latest) - len(ok)
    for (task_id, trial, a, b), j in ok.items():
        swapped = ok.get((task_id, trial, b, a))
        if a < b and swapped is not None:
            summary.both_orders += 1
            summary.order_disagreements += j.winner != swapped.winner
    outcomes = [Outcome(j.a, j.b, j.score, j.task_id) for j in ok.values()]
    summary.models = rank(labels, outcomes)
    return summary


def arena_table(summary: ArenaSummary) -> Table:
    """The ranking as a terminal table, strongest first."""
    title = (
        f"arena, judge {summary.judge}: {summary.shared} shared conversations, {summary.judgements} judgements "
        f"({summary.failed} failed), orders disagreed on {summary.order_disagreements} of {summary.both_orders}"
    )
    table = Table(title=title)
    for column in ("model", "Bradley-Terry strength [95% CI]", "Elo", "wins", "ties", "losses"):
        table.add_column(column)
    for label, m in sorted(summary.models.items(), key=lambda item: -item[1].strength.mean):
        table.add_row(label, fmt_interval(m.strength), f"{m.elo:.0f}", str(m.wins), str(m.ties), str(m.losses))
    return table


def plot_arena(summary: ArenaSummary, path: Path) -> Path:
    """Each model's Bradley-Terry strength with its 95% interval, on a log scale (1 = the geometric mean)."""
    import matplotlib  # heavy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: matplotlib
    from matplotlib.ticker import FuncFormatter  # heavy: matplotlib

    ranked = sorted(summary.models.items(), key=lambda item: item[1].strength.mean)
    means = [m.strength.mean for _, m in ranked]
    errors = [
        [max(0.0, m.strength.mean - m.strength.low) for _, m in ranked],
        [max(0.0, m.strength.high - m.strength.mean) for _, m in ranked],
    ]
    fig, ax = plt.subplots(figsize=(6, 1.2 + 0.5 * len(ranked)))
    ax.errorbar(means, range(len(ranked)), xerr=errors, fmt="o", capsize=4, color="#3a6ea5")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    plain = FuncFormatter(lambda x, _: f"{x:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.set_yticks(range(len(ranked)), [label for label, _ in ranked])
    ax.set_xlabel("Bradley-Terry strength (95% bootstrap interval over tasks)")
    ax.set_title(f"Arena, judged by {summary.judge}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
