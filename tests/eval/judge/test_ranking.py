"""Bradley-Terry, its bootstrap and Elo: a known order is recovered, the fit solves the likelihood equations, and any
set of verdicts, in any order, gives the same finite strengths."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.eval.judge.ranking import ELO_START, Outcome, bootstrap_strengths, bradley_terry, elo, rank, win_matrix

TRUE = {"strong": 4.0, "middle": 1.0, "weak": 0.25}


def sampled(true: dict[str, float], tasks: int, seed: int = 0) -> list[Outcome]:
    """Verdicts drawn from a Bradley-Terry model with strengths ``true``, both orders of every pair per task."""
    rng = random.Random(seed)
    out = []
    for task in range(tasks):
        for a in true:
            for b in true:
                if a != b:
                    won = rng.random() < true[a] / (true[a] + true[b])
                    out.append(Outcome(a, b, 1.0 if won else 0.0, f"t{task}"))
    return out


def test_the_fit_recovers_known_strengths_from_expected_wins() -> None:
    models = list(TRUE)
    p = np.array([TRUE[m] for m in models])
    games = 10_000
    wins = games * p[:, None] / (p[:, None] + p[None, :]) * (1 - np.eye(len(p)))
    fitted = bradley_terry(wins)
    expected = p / np.exp(np.log(p).mean())
    assert fitted == pytest.approx(expected, rel=2e-3)


def test_the_fit_solves_the_likelihood_equations_with_the_virtual_ties() -> None:
    models = list(TRUE)
    wins = win_matrix(models, sampled(TRUE, 20))
    prior = 1.0
    p = bradley_terry(wins, prior=prior)
    padded = wins + prior / 2 * (1 - np.eye(len(models)))
    games = padded + padded.T
    expected_wins = (games * p[:, None] / (p[:, None] + p[None, :])).sum(axis=1)
    assert expected_wins == pytest.approx(padded.sum(axis=1), rel=1e-6)


def test_sampled_verdicts_rank_the_models_in_their_true_order_with_separated_intervals() -> None:
    ranks = rank(list(TRUE), sampled(TRUE, 60), samples=300)
    strengths = {m: r.strength for m, r in ranks.items()}
    assert strengths["strong"].low > strengths["middle"].high and strengths["middle"].low > strengths["weak"].high
    assert ranks["strong"].elo > ranks["middle"].elo > ranks["weak"].elo
    assert all(iv.low <= iv.mean <= iv.high for iv in strengths.values())
    assert ranks["strong"].wins + ranks["strong"].losses == 60 * 4 and ranks["strong"].ties == 0


def test_a_stack_of_win_matrices_is_fitted_each_as_alone() -> None:
    models = list(TRUE)
    stack = np.array([win_matrix(models, sampled(TRUE, tasks, seed)) for seed, tasks in enumerate((1, 5, 40))])
    stack[0] = 0.0  # no verdicts: converges at once, beside fits that take longer
    fitted = bradley_terry(stack)
    assert fitted.shape == (3, 3)
    assert all(np.array_equal(fitted[i], bradley_terry(stack[i])) for i in range(3))
    assert bradley_terry(stack.reshape(3, 1, 3, 3)).shape == (3, 1, 3)


def test_a_model_that_wins_everything_stays_finite_and_ties_make_equals() -> None:
    clean_sweep = [Outcome("a", "b", 1.0, f"t{i}") for i in range(50)]
    p = bootstrap_strengths(["a", "b"], clean_sweep, samples=50)
    assert np.isfinite(p["a"].high) and p["a"].mean > 10 > 0.1 > p["b"].mean > 0
    ties = [Outcome("a", "b", 0.5, "t"), Outcome("b", "c", 0.5, "t"), Outcome("c", "a", 0.5, "t")]
    assert bradley_terry(win_matrix(["a", "b", "c"], ties)) == pytest.approx([1.0, 1.0, 1.0])


def test_a_non_positive_prior_is_refused() -> None:
    with pytest.raises(ValueError, match="prior must be positive"):
        bradley_terry(np.zeros((2, 2)), prior=0.0)


NAMES = ["m0", "m1", "m2", "m3"]
outcome = st.builds(
    lambda pair, score, task: Outcome(pair[0], pair[1], score, task),
    st.permutations(NAMES).map(lambda p: (p[0], p[1])),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from(["t1", "t2", "t3"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(outcome, max_size=30), st.randoms(use_true_random=False))
def test_any_verdicts_give_finite_strengths_whatever_their_order(outcomes: list[Outcome], rnd: random.Random) -> None:
    shuffled = list(outcomes)
    rnd.shuffle(shuffled)
    strengths = bradley_terry(win_matrix(NAMES, outcomes))
    assert np.all(np.isfinite(strengths)) and np.all(strengths > 0)
    assert np.log(strengths).mean() == pytest.approx(0.0, abs=1e-9)
    assert bradley_terry(win_matrix(NAMES, shuffled)) == pytest.approx(strengths, rel=1e-6)
    ratings = elo(NAMES, outcomes, shuffles=5)
    assert elo(NAMES, shuffled, shuffles=5) == ratings
    assert sum(ratings.values()) / len(NAMES) == pytest.approx(ELO_START)  # every update moves points, never makes them


def test_elo_moves_the_winner_up_and_the_loser_down() -> None:
    ratings = elo(["a", "b"], [Outcome("a", "b", 1.0, "t"), Outcome("b", "a", 0.0, "t")])
    assert ratings["a"] > ELO_START > ratings["b"]
