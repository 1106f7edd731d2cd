"""Evaluation metrics: average reward, 100% success, pass^k, bootstrap intervals, error shares."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from josh.run.conversation import ConversationRecord
from josh.run.diagnostics import DiagnosticsSummary, summarize_diagnoses
from josh.run.info import RunInfo
from josh.types import ErrorCategory, is_success


class Interval(BaseModel):
    """A point estimate with a bootstrap 95% interval."""

    mean: float
    low: float
    high: float


class Summary(BaseModel):
    """What ``summary.json`` holds for one evaluation run; ``reward_notes``: how the environment scored the final
    reward, as it says (τ²: whether NL assertions were judged)."""

    conversations: int = Field(description="finished conversations: the metrics are over these")
    failed: int = Field(0, description="conversations whose LLM failed (left out of every metric, redone on rerun)")
    pending: int = Field(
        0, description="conversations of the run not finished (not run yet, or failed): 0 when complete"
    )
    tasks: int
    trials: int
    average_reward: Interval
    success_rate: Interval
    pass_k: dict[int, float]
    malformed_share: float
    bad_api_use_share: float
    error_counts: dict[str, int]
    end_reasons: dict[str, int]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float = 0.0
    wall_s: float
    run: RunInfo | None = None
    diagnostics: DiagnosticsSummary | None = None
    reward_notes: dict[str, str] = Field(default_factory=dict)


def pass_hat_k(trials: Sequence[Sequence[float]], k: int) -> float:
    """τ-bench's pass^k: the mean over tasks of C(c, k) / C(n, k), the chance that k i.i.d. trials of a task all
    succeed, with n trials and c successes (``is_success``: reward >= 1 - 1e-6) per task. Every task needs k trials."""
    if not trials:
        raise ValueError("pass^k needs at least one task")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    total = 0.0
    for index, rewards in enumerate(trials):
        if len(rewards) < k:
            raise ValueError(f"task {index} has {len(rewards)} trials, fewer than k={k}")
        total += math.comb(sum(map(is_success, rewards)), k) / math.comb(len(rewards), k)
    return total / len(trials)


def bootstrap(groups: Sequence[Sequence[float]], *, samples: int = 2000, seed: int = 0) -> Interval:
    """Percentile bootstrap 95% interval of the mean, resampling groups (tasks) so a task's trials stay together."""
    flat = [x for g in groups for x in g]
    if not flat:
        return Interval(mean=0.0, low=0.0, high=0.0)
    sums = np.array([sum(g) for g in groups], dtype=float)
    sizes = np.array([len(g) for g in groups], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(groups), size=(samples, len(groups)))
    means = np.sort(sums[draws].sum(axis=1) / sizes[draws].sum(axis=1))
    low, high = means[int(0.025 * (samples - 1))], means[math.ceil(0.975 * (samples - 1))]
    return Interval(mean=sum(flat) / len(flat), low=float(low), high=float(high))


class PairedDifference(BaseModel):
    """How much ``after`` beats ``before`` on the tasks both were evaluated on (per-task means, paired)."""

    difference: Interval
    tasks: int
    better: int
    worse: int


def paired_difference(before: dict[str, list[float]], after: dict[str, list[float]]) -> PairedDifference:
    """Mean per-task improvement with a bootstrap 95% interval over the shared tasks, and how many tasks moved."""
    shared = sorted(before.keys() & after.keys())
    diffs = [float(np.mean(after[t]) - np.mean(before[t])) for t in shared if before[t] and after[t]]
    return PairedDifference(
        difference=bootstrap([[d] for d in diffs]),
        tasks=len(diffs),
        better=sum(d > 0 for d in diffs),
        worse=sum(d < 0 for d in diffs),
    )


def _all_errors(record: ConversationRecord) -> list[ErrorCategory]:
    return list(record.errors) + list(record.tool_errors)


def summarize(records: Sequence[ConversationRecord], *, cost: float = 0.0, wall_s: float = 0.0) -> Summary:
    """Aggregate per-conversation records into the run's summary: metrics over the finished ones, the ``failed``
    ones (see ``josh.llm.health``) counted beside them; LLM calls and tokens over all, as they were spent."""
    spent, records = records, [r for r in records if r.failed is None]
    by_task: dict[str, list[ConversationRecord]] = defaultdict(list)
    for r in records:
        by_task[r.task_id].append(r)
    rewards = [[r.reward for r in rs] for rs in by_task.values()]
    successes = [[float(r.success) for r in rs] for rs in by_task.values()]
    trials = max((len(rs) for rs in by_task.values()), default=0)
    error_counts: dict[str, int] = defaultdict(int)
    end_reasons: dict[str, int] = defaultdict(int)
    malformed = bad_use = 0
    for r in records:
        errors = _all_errors(r)
        for e in errors:
            error_counts[e.value] += 1
        end_reasons[r.end_reason] += 1
        malformed += any(e.is_malformed for e in errors)
        bad_use += any(e.is_bad_api_use for e in errors)
    n = len(records)
    return Summary(
        conversations=n,
        failed=len(spent) - n,
        tasks=len(by_task),
        trials=trials,
        average_reward=bootstrap(rewards),
        success_rate=bootstrap(successes),
        pass_k={k: pass_hat_k([r for r in rewards if len(r) >= k], k) for k in range(1, trials + 1)},
        malformed_share=malformed / n if n else 0.0,
        bad_api_use_share=bad_use / n if n else 0.0,
        error_counts=dict(error_counts),
        end_reasons=dict(end_reasons),
        llm_calls=sum(r.llm_calls for r in spent),
        prompt_tokens=sum(r.prompt_tokens for r in spent),
        completion_tokens=sum(r.completion_tokens for r in spent),
        cost=cost,
        wall_s=wall_s,
        diagnostics=summarize_diagnoses(r.diagnosis for r in records),
    )
