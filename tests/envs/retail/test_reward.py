"""pass^k (τ-bench's definition, ``josh.eval.metrics``) and the required-output check of the retail reward."""

from __future__ import annotations

from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josh.envs.taubench.reward import outputs_found
from josh.eval.metrics import pass_hat_k
from josh.types import Message, assistant, tool_result, user


def test_pass_hat_k_by_hand() -> None:
    trials = [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert pass_hat_k(trials, 1) == pytest.approx(0.5)
    assert pass_hat_k(trials, 2) == pytest.approx((1 / 3 + 0) / 2)
    assert pass_hat_k(trials, 3) == 0.0


def test_pass_hat_k_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="fewer than k"):
        pass_hat_k([[1.0]], 2)
    with pytest.raises(ValueError, match="at least one task"):
        pass_hat_k([], 1)
    with pytest.raises(ValueError, match="at least 1"):
        pass_hat_k([[1.0]], 0)


trial_sets = st.integers(1, 6).flatmap(
    lambda n: st.lists(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=n, max_size=n), min_size=1, max_size=8)
)


@given(trial_sets)
def test_pass_hat_k_properties(trials: list[list[float]]) -> None:
    n = len(trials[0])
    values = [pass_hat_k(trials, k) for k in range(1, n + 1)]
    assert values[0] == pytest.approx(sum(r == 1.0 for row in trials for r in row) / (n * len(trials)))
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:], strict=False))
    assert all(0.0 <= v <= 1.0 for v in values)
    expected_last = sum(comb(sum(r == 1.0 for r in row), n) for row in trials) / len(trials)
    assert values[-1] == pytest.approx(expected_last)


def test_outputs_ignore_case_and_commas_and_only_count_agent_replies() -> None:
    messages: list[Message] = [
        user("the total is 1093.34"),
        assistant(calls=[]),
        tool_result("call_1", "10 t-shirts"),
        assistant("Your refund is $1,093.34 and there are TEN Shirts."),
    ]
    found = outputs_found(["1093.34", "ten shirts", "t-shirts"], messages)
    assert found == {"1093.34": True, "ten shirts": True, "t-shirts": False}
    assert outputs_found([], messages) == {}
