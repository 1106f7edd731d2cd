"""Gold replays score 1.0, and josh's final reward equals τ²'s evaluator on the same (perturbed) trajectories; the
partial reward never credits doing nothing."""

from __future__ import annotations

import pytest

from josh.types import ToolCall
from tests.envs.tau2.helpers import gold_closing, gold_script, run_josh, sample, tau2_reward

DOMAINS = ("airline", "retail", "telecom")


@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_replay_on_a_sample_scores_one(tau2_envs, domain: str) -> None:
    env = tau2_envs(domain)
    for task in sample(env.tasks("base"), 3):
        state, messages = run_josh(env, task, gold_script(task), gold_closing(task))
        assert env.reward(state, messages) == 1.0, task.id
        assert state.goal_reward == (1.0 if task.goals else 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("domain", DOMAINS)
def test_gold_replay_on_every_base_task_scores_one(tau2_envs, domain: str) -> None:
    env = tau2_envs(domain)
    failed = [
        task.id
        for task in env.tasks("base")
        if env.reward(*run_josh(env, task, gold_script(task), gold_closing(task))) != 1.0
    ]
    assert failed == []


def _perturbations(task) -> dict[str, tuple[list[tuple[str, ToolCall]], str | None]]:
    gold = gold_script(task)
    writes = [
        i for i, (side, call) in enumerate(gold) if side == "assistant" and call.name in {g.name for g in task.goals}
    ]
    last = writes[-1]
    side, call = gold[last]
    key = next(iter(call.arguments))
    changed = ToolCall(name=call.name, arguments={**call.arguments, key: "changed"}, id=call.id)
    extra = ToolCall(name=call.name, arguments={**call.arguments, "bogus": 1}, id="extra")
    return {
        "gold": (gold, gold_closing(task)),
        "silent": (gold, None),
        "nothing": ([], gold_closing(task)),
        "last write dropped": (gold[:last] + gold[last + 1 :], gold_closing(task)),
        "last write changed": (gold[:last] + [(side, changed)] + gold[last + 1 :], gold_closing(task)),
        "bad call added": (gold + [("assistant", extra)], gold_closing(task)),
        "write twice": (gold + [(side, call.model_copy(update={"id": "again"}))], gold_closing(task)),
    }


@pytest.mark.parametrize("domain", ("airline", "retail"))
def test_final_reward_equals_tau2_evaluator_on_perturbed_trajectories(tau2_envs, domain: str) -> None:
    """Expensive by design: τ²'s evaluator, the reference, loads and hashes two environments of its own per
    perturbation (about half a second each on airline)."""
    env = tau2_envs(domain)
    task = next(t for t in env.tasks("test") if t.goals and t.details["outputs"])
    rewards = {}
    for name, (script, closing) in _perturbations(task).items():
        state, messages = run_josh(env, task, script, closing)
        rewards[name] = env.reward(state, messages)
        assert rewards[name] == tau2_reward(env, task, script, closing, state.calls), name
    assert rewards["gold"] == 1.0 and rewards["bad call added"] == 1.0
    assert rewards["silent"] == rewards["nothing"] == rewards["last write dropped"] == 0.0


def test_partial_reward_counts_gold_writes_and_never_credits_doing_nothing(tau2_envs) -> None:
    env = tau2_envs("retail")
    tasks = env.tasks("base")
    assert any(not t.goals for t in tasks)  # tasks whose gold writes nothing exist
    for task in tasks:
        assert env.reset(task).goal_reward == 0.0
    task = next(t for t in tasks if len(t.goals) >= 2)
    script = gold_script(task)
    first_write = next(i for i, (_, c) in enumerate(script) if c.name in env.write_tools)
    state, _ = run_josh(env, task, script[: first_write + 1], None)
    assert state.goal_reward == pytest.approx(1 / len(task.goals))
    state, _ = run_josh(env, task, script + script, None)  # repeating writes completes nothing more
    assert state.goal_reward == 1.0 and len(state.completed) == len(task.goals)
