"""Gold replay over every airline task on the real data: deterministic final states, full reward for the replay
agent with the scripted user, goals and outcome reward."""

from __future__ import annotations

import hashlib

import pytest

from josh.agents.replay import ReplayAgent
from josh.envs.airline import AirlineEnv, details_of
from josh.envs.airline.tools import WRITE_TOOLS
from josh.envs.taubench.user import TauScriptedUser
from josh.run.conversation import run_conversation
from josh.types import Task, ToolCall, assistant, user

# SHA-256 over the 50 gold final-state hashes, in task order. When it was recorded, the full final databases of
# all 50 gold replays were compared with those of a transcription of the upstream τ-bench tools: all equal.
GOLD_DIGEST = "cb5c5ae9c363b752150ddd2046fc5bfde3d2056e2015ad22ba82d20bcaa760c7"


@pytest.fixture(scope="module")
def env(shared_data) -> AirlineEnv:
    return AirlineEnv(shared_data / "taubench" / "airline")


@pytest.fixture(scope="module")
def tasks(env: AirlineEnv) -> list[Task]:
    return env.tasks("test")


def test_tasks_load_with_write_goals(tasks: list[Task]) -> None:
    assert len(tasks) == 50 and len({t.id for t in tasks}) == 50
    for task in tasks:
        details = details_of(task)
        assert task.env == "airline" and task.user_goal == details.instruction
        assert [g.name for g in task.goals] == [a.name for a in details.actions if a.name in WRITE_TOOLS]
    assert [i for i, t in enumerate(tasks) if details_of(t).outputs] == [2, 8, 9, 44]


def test_gold_replay_is_deterministic_and_every_gold_call_succeeds(env: AirlineEnv, tasks: list[Task]) -> None:
    hashes = []
    for task in tasks:
        state = env.reset(task)
        for call in details_of(task).gold_calls():
            result = env.call(state, call)
            assert result.error is None, (task.id, call.name, result.content)
        hashes.append(state.data_hash())
    assert hashlib.sha256("".join(hashes).encode()).hexdigest() == GOLD_DIGEST
    assert [env.gold_state(t).data_hash() for t in reversed(tasks)] == hashes[::-1]
    unchanged = env.reset(tasks[0]).data_hash()
    assert sum(h == unchanged for h in hashes) == 20  # lookups only, refusals, transfers


async def test_replay_agent_with_scripted_user_earns_full_reward(env: AirlineEnv, tasks: list[Task]) -> None:
    for task in tasks:
        record = await run_conversation(env, task, ReplayAgent.for_task(env, task), TauScriptedUser())
        assert record.reward == 1.0, task.id
        assert record.goal_reward == (1.0 if task.goals else 0.0)
        assert record.end_reason in ("user_done", "terminated")


def test_reward_needs_the_gold_database_and_every_output(env: AirlineEnv, tasks: list[Task]) -> None:
    task = tasks[8]  # cancel + book, outputs 327, 1000, 1786
    outputs = details_of(task).outputs
    gold = env.gold_state(task)
    said = [assistant(f"That comes to {o}.") for o in outputs]
    assert env.reward(env.reset(task), said) == 0.0
    assert env.reward(gold, said) == 1.0
    assert env.reward(gold, said[:-1]) == 0.0 and env.reward(gold, [user(" ".join(outputs)), *said[:-1]]) == 0.0
    extra = gold.fork()
    env.call(extra, ToolCall(name="send_certificate", arguments={"user_id": details_of(task).user_id, "amount": 100}))
    info = env.score(extra, said)
    assert (info.reward, info.r_actions) == (0.0, False) and env.reward(gold, said) == 1.0


def test_the_policy_gives_the_current_time(env: AirlineEnv, tasks: list[Task]) -> None:
    assert "2024-05-15 15:00:00 EST" in env.system_prompt(tasks[0])
