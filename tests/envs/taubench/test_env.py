"""josh.envs.taubench.env: what every τ-bench domain shares, on the real retail and airline data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from josh.agents.replay import ReplayAgent
from josh.core.env import ConversationState, Env
from josh.envs import build_env
from josh.envs.taubench import TauBenchEnv, details_of
from josh.envs.taubench.user import TauScriptedUser
from josh.run.conversation import run_conversation
from josh.types import Task, ToolCall


@dataclass(frozen=True)
class Domain:
    name: str
    split: str  # the split the checks draw tasks from
    key: str  # an argument of a write goal, and a value no record has
    unknown: str
    max_turns: int  # enough for a replay with one call a turn


DOMAINS = [
    Domain("retail", "dev", "order_id", "#W0000000", 20),
    Domain("airline", "test", "reservation_id", "ZZZZZZ", 30),
]


@pytest.fixture(scope="module", params=DOMAINS, ids=lambda d: d.name)
def domain(request: pytest.FixtureRequest, shared_data: Path) -> tuple[Domain, TauBenchEnv]:
    spec: Domain = request.param
    return spec, build_env(spec.name, str(shared_data / "taubench" / spec.name))


async def test_step_by_step_replay_with_confirmations(domain: tuple[Domain, TauBenchEnv]) -> None:
    """One gold call a turn, each confirmed by the scripted user with "yes", earns the full reward."""
    spec, env = domain
    task = next(t for t in env.tasks(spec.split) if len(details_of(t).actions) >= 3)
    agent = ReplayAgent.for_task(env, task, calls_per_turn=1)
    user = TauScriptedUser(max_turns=spec.max_turns)
    record = await run_conversation(env, task, agent, user, max_turns=spec.max_turns)
    assert record.reward == 1.0 and record.turns == len(details_of(task).actions)
    said = [m.content for m in record.transcript if m.role == "user"]
    assert said[1:] == ["yes"] * (record.turns - 1) + ["###STOP###"]


def test_goals_complete_once_on_equal_arguments(domain: tuple[Domain, TauBenchEnv]) -> None:
    spec, env = domain
    task = next(t for t in env.tasks(spec.split) if len(t.goals) >= 2 and spec.key in t.goals[1].parameters)
    state = env.reset(task)
    goal = task.goals[1]
    altered = {**goal.parameters, spec.key: spec.unknown}
    assert env.call(state, ToolCall(name=goal.name, arguments=altered)).completed_goals == ()
    assert env.call(state, ToolCall(name=goal.name, arguments=goal.parameters)).completed_goals == (1,)
    assert env.call(state, ToolCall(name=goal.name, arguments=goal.parameters)).completed_goals == ()
    assert state.completed == {1} and state.goal_reward == 1 / len(task.goals)


def test_system_prompt_is_the_policy(domain: tuple[Domain, TauBenchEnv], shared_data: Path) -> None:
    spec, env = domain
    policy = (shared_data / "taubench" / spec.name / "policy.md").read_text()
    assert env.system_prompt(env.tasks(spec.split)[0]) == policy


def test_env_protocol_and_wrong_inputs(domain: tuple[Domain, TauBenchEnv]) -> None:
    spec, env = domain
    assert isinstance(env, Env)
    with pytest.raises(ValueError, match="toolwoz"):
        env.reset(Task(id="x", env="toolwoz"))
    with pytest.raises(TypeError, match=env.state_type.__name__):
        env.call(ConversationState(Task(env=spec.name, id="x")), ToolCall(name="think", arguments={"thought": ""}))
