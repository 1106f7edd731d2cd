import math

import pytest

from josh.eval.metrics import bootstrap, paired_difference, pass_hat_k, summarize
from josh.run.conversation import ConversationRecord
from josh.types import ErrorCategory


def record(task_id, reward, trial=0, errors=(), tool_errors=()):
    return ConversationRecord(
        task_id=task_id,
        trial=trial,
        reward=reward,
        goal_reward=reward,
        success=reward == 1.0,
        n_goals=2,
        end_reason="user_done",
        errors=list(errors),
        tool_errors=list(tool_errors),
    )


def test_pass_hat_k_matches_hand_computed_values():
    # task A: 3 of 4 trials succeed, task B: 1 of 4.
    trials = [[1.0, 1.0, 0.5, 1.0], [0.0, 1.0, 0.0, 0.0]]
    assert pass_hat_k(trials, 1) == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert pass_hat_k(trials, 2) == pytest.approx((3 / 6 + 0 / 6) / 2)
    assert pass_hat_k(trials, 3) == pytest.approx((1 / 4 + 0) / 2)
    assert pass_hat_k(trials, 4) == 0.0


def test_summary_reward_success_and_error_shares():
    records = [
        record("a", 1.0, errors=[ErrorCategory.MALFORMED]),
        record("b", 0.5, tool_errors=[ErrorCategory.INVALID_VALUE, ErrorCategory.INVALID_VALUE]),
        record("c", 0.0, tool_errors=[ErrorCategory.UNKNOWN_TOOL], errors=[ErrorCategory.MALFORMED]),
        record("d", 1.0),
    ]
    s = summarize(records)
    assert s.average_reward.mean == pytest.approx(0.625)
    assert s.success_rate.mean == pytest.approx(0.5)
    assert s.malformed_share == pytest.approx(0.5)
    assert s.bad_api_use_share == pytest.approx(0.5)
    assert s.error_counts == {"malformed": 2, "invalid_value": 2, "unknown_tool": 1}
    assert s.pass_k == {1: pytest.approx(0.5)}
    assert s.average_reward.low <= 0.625 <= s.average_reward.high


def test_bootstrap_interval_narrows_with_more_tasks_and_is_degenerate_for_constant_data():
    assert bootstrap([[1.0]] * 10).low == bootstrap([[1.0]] * 10).high == 1.0
    few = bootstrap([[1.0], [0.0]] * 5, seed=1)
    many = bootstrap([[1.0], [0.0]] * 200, seed=1)
    assert (many.high - many.low) < (few.high - few.low)
    assert math.isclose(many.mean, 0.5)


def test_bootstrap_keeps_trials_of_a_task_together():
    # Two tasks, one always succeeds, one always fails: resampling tasks gives means of 0, 0.5 or 1 only.
    iv = bootstrap([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], samples=500)
    assert iv.low in (0.0, 0.5) and iv.high in (0.5, 1.0)


def test_paired_difference_uses_shared_tasks_and_per_task_means():
    before = {"a": [0.0, 1.0], "b": [1.0], "c": [0.0], "only_before": [1.0]}
    after = {"a": [1.0, 1.0], "b": [0.5], "c": [0.0], "only_after": [0.0]}
    result = paired_difference(before, after)
    assert result.tasks == 3 and result.better == 1 and result.worse == 1
    assert result.difference.mean == pytest.approx((0.5 - 0.5 + 0.0) / 3)
    assert result.difference.low <= result.difference.mean <= result.difference.high
    same = paired_difference(before, before)
    assert (same.difference.low, same.difference.high, same.better, same.worse) == (0.0, 0.0, 0, 0)
