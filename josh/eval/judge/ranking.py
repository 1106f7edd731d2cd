"""Rankings from pairwise verdicts: a Bradley-Terry fit (minorisation-maximisation, Hunter 2004) with a bootstrap 95%
interval over tasks, and Elo as TD-Eval reports it (sequential updates from 1000 with K=32, averaged over shuffled
orders of the verdicts).

Bradley-Terry gives model i a strength p_i with P(i beats j) = p_i / (p_i + p_j); a tie counts as half a win for each
side. One virtual tie between every two models (``prior``) keeps every strength finite when a model wins or loses
every comparison, and matters little once there are many real ones. Strengths are normalised to a geometric mean of
1, so the ratio of two strengths is the odds that one beats the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel

from josh.eval.metrics import Interval

ELO_START, ELO_K, ELO_SHUFFLES = 1000.0, 32.0, 100


class Outcome(NamedTuple):
    """One verdict: ``score`` is 1 when ``first`` won, 0.5 for a tie, 0 when ``second`` won; ``group`` is the task
    (the bootstrap resamples tasks)."""

    first: str
    second: str
    score: float
    group: str


class ModelRank(BaseModel):
    """One model's standing: Bradley-Terry strength with its bootstrap interval, Elo, and its verdict counts."""

    strength: Interval
    elo: float
    wins: int = 0
    ties: int = 0
    losses: int = 0


def win_matrix(models: Sequence[str], outcomes: Sequence[Outcome]) -> np.ndarray:
    """``W[i, j]``: how often model i beat model j, a tie counting half for each."""
    index = {m: i for i, m in enumerate(models)}
    wins = np.zeros((len(models), len(models)))
    for o in outcomes:
        i, j = index[o.first], index[o.second]
        wins[i, j] += o.score
        wins[j, i] += 1.0 - o.score
    return wins


def bradley_terry(wins: np.ndarray, *, prior: float = 1.0, tol: float = 1e-10, max_iter: int = 10_000) -> np.ndarray:
    """Strengths (geometric mean 1) maximising the Bradley-Terry likelihood of ``wins`` plus ``prior`` virtual ties
    between every two models, by minorisation-maximisation. ``wins`` may be a stack of matrices (``[..., k, k]``):
    each is fitted on its own, all in the same vectorised steps, and stops where it converges, as alone."""
    if prior <= 0:
        raise ValueError(f"prior must be positive (it keeps strengths finite), got {prior}")
    w = np.asarray(wins, dtype=float)
    k, stack = w.shape[-1], w.shape[:-2]
    if k < 2:
        return np.ones((*stack, k))
    w = w.reshape(-1, k, k) + prior / 2 * (np.ones((k, k)) - np.eye(k))
    games, total = w + w.transpose(0, 2, 1), np.log(w.sum(axis=2))
    log_p = np.zeros((len(w), k))
    going = np.arange(len(w))  # the fits that have not converged yet
    for _ in range(max_iter):
        p = np.exp(log_p[going])
        new = total[going] - np.log((games[going] / (p[:, :, None] + p[:, None, :])).sum(axis=2))
        new -= new.mean(axis=1, keepdims=True)
        change = np.abs(new - log_p[going]).max(axis=1)
        log_p[going] = new
        going = going[change >= tol]
        if not len(going):
            break
    return np.exp(log_p).reshape(*stack, k)


def bootstrap_strengths(
    models: Sequence[str], outcomes: Sequence[Outcome], *, samples: int = 1000, seed: int = 0
) -> dict[str, Interval]:
    """Each model's strength on all outcomes, with a percentile bootstrap 95% interval resampling tasks."""
    groups = sorted({o.group for o in outcomes})
    per_group = np.array([win_matrix(models, [o for o in outcomes if o.group == g]) for g in groups])
    point = bradley_terry(win_matrix(models, outcomes))
    if not groups:
        return {m: Interval(mean=float(p), low=float(p), high=float(p)) for m, p in zip(models, point, strict=True)}
    rng = np.random.default_rng(seed)
    counts = [
        np.bincount(rng.integers(0, len(groups), size=len(groups)), minlength=len(groups)) for _ in range(samples)
    ]
    draws = bradley_terry(np.tensordot(np.array(counts), per_group, axes=1))  # one resample of the tasks per row
    draws.sort(axis=0)
    low, high = draws[int(0.025 * (samples - 1))], draws[math.ceil(0.975 * (samples - 1))]
    return {m: Interval(mean=float(point[i]), low=float(low[i]), high=float(high[i])) for i, m in enumerate(models)}


def elo(
    models: Sequence[str],
    outcomes: Sequence[Outcome],
    *,
    k: float = ELO_K,
    start: float = ELO_START,
    shuffles: int = ELO_SHUFFLES,
    seed: int = 0,
) -> dict[str, float]:
    """Elo after sequential updates over the outcomes, averaged over ``shuffles`` random orders (the same orders
    whatever order the outcomes come in)."""
    index = {m: i for i, m in enumerate(models)}
    canonical = sorted(outcomes)
    pairs = [(index[o.first], index[o.second], o.score) for o in canonical]
    rng = np.random.default_rng(seed)
    total = np.zeros(len(models))
    for _ in range(shuffles):
        rating = np.full(len(models), start)
        for n in rng.permutation(len(pairs)):
            i, j, score = pairs[n]
            step = k * (score - 1.0 / (1.0 + 10 ** ((rating[j] - rating[i]) / 400)))
            rating[i] += step
            rating[j] -= step
        total += rating
    return {m: float(total[i] / shuffles) for i, m in enumerate(models)}


def rank(
    models: Sequence[str], outcomes: Sequence[Outcome], *, samples: int = 1000, seed: int = 0
) -> dict[str, ModelRank]:
    """Every model's Bradley-Terry strength (bootstrap over tasks), Elo and win/tie/loss counts."""
    strengths = bootstrap_strengths(models, outcomes, samples=samples, seed=seed)
    ratings = elo(models, outcomes, seed=seed)
    out = {m: ModelRank(strength=strengths[m], elo=ratings[m]) for m in models}
    for o in outcomes:
        first, second = out[o.first], out[o.second]
        if o.score == 0.5:
            first.ties += 1
            second.ties += 1
        elif o.score > 0.5:
            first.wins += 1
            second.losses += 1
        else:
            first.losses += 1
            second.wins += 1
    return out
