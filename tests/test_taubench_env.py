"""josh.envs.taubench.env: what every τ-bench domain shares, on the real retail and airline data."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.agents.replay import ReplayAgent
from josh.conversation import run_conversation
from josh.envs import build_env
from josh.envs.taubench import details_of
from josh.envs.taubench.user import TauScriptedUser
from josh.types import ToolCall

# (environment, split, an argument of its second goal and a value no record has, most turns of a replay)
DOMAINS = [("retail", "dev", "order_id", "#W0000000", 20), ("airline", "test", "reservation_id", "ZZZZZZ", 30)]


@pytest.mark.parametrize(("name", "split", "key", "unknown", "max_turns"), DOMAINS)
async def test_step_by_step_replay_with_confirmations(
    shared_data: Path, name: str, split: str, key: str, unknown: str, max_turns: int
) -> None:
    """One gold call a turn, each confirmed by the scripted user with "yes", earns the full reward."""
    env = build_env(name, str(shared_data / "taubench" / name))
    task = next(t for t in env.tasks(split) if len(details_of(t).actions) >= 3)
    agent = ReplayAgent.for_task(env, task, calls_per_turn=1)
    record = await run_conversation(env, task, agent, TauScriptedUser(max_turns=max_turns), max_turns=max_turns)
    assert record.reward == 1.0 and record.turns == len(details_of(task).actions)
    said = [m.content for m in record.transcript if m.role == "user"]
    assert said[1:] == ["yes"] * (record.turns - 1) + ["###STOP###"]


@pytest.mark.parametrize(("name", "split", "key", "unknown", "max_turns"), DOMAINS)
def test_goals_complete_once_on_equal_arguments(
    shared_data: Path, name: str, split: str, key: str, unknown: str, max_turns: int
) -> None:
    env = build_env(name, str(shared_data / "taubench" / name))
    task = next(t for t in env.tasks(split) if len(t.goals) >= 2 and key in t.goals[1].parameters)
    state = env.reset(task)
    goal = task.goals[1]
    altered = {**goal.parameters, key: unknown}
    assert env.call(state, ToolCall(name=goal.name, arguments=altered)).completed_goals == ()
    assert env.call(state, ToolCall(name=goal.name, arguments=goal.parameters)).completed_goals == (1,)
    assert env.call(state, ToolCall(name=goal.name, arguments=goal.parameters)).completed_goals == ()
    assert state.completed == {1} and state.goal_reward == 1 / len(task.goals)
