"""Telecom dual control through ``josh eval``: the scripted τ² user makes the user-side gold calls on its device,
the record says which side made each call, the trajectory keeps the execution order, and a conversation cut short
scores τ²'s 0.0."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from josh.agents.replay import ReplayAgent
from josh.envs.tau2.trajectory import TERMINATION, to_trajectory
from josh.envs.taubench.tau2_user import DID, Tau2ScriptedUser, user_calls
from josh.run.conversation import run_conversation
from josh.types import assistant, user
from tests.envs.tau2.helpers import gold_closing, gold_script, run_josh

ARGS = ["eval", "--env", "tau2-telecom", "--split", "base", "--agent", "replay"]


def _eval(tmp_path, name: str, *extra: str) -> tuple[str, list[dict]]:
    from josh.cli.main import app

    out = tmp_path / name
    result = CliRunner().invoke(app, [*ARGS, *extra, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output, [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_eval_with_the_scripted_tau2_user_scores_one_where_the_user_must_act(tau2_envs, tmp_path) -> None:
    env = tau2_envs("telecom")
    assert all(task.details["user_actions"] for task in env.tasks("base")[:5])
    output, records = _eval(tmp_path, "scripted", "--user", "tau2_scripted", "--limit", "5")
    assert "average reward [95% CI]             │ 1.000" in output
    for record in records:
        actions = [a["name"] for a in env.task(record["task_id"]).details["user_actions"]]
        by_user = [c["name"] for m in record["transcript"] if m["role"] == "user" for c in m.get("tool_calls") or ()]
        assert by_user == actions
        assert not any(m["role"] == "user" and m.get("tool_calls") for m in record["messages"])  # the agent's view
        assert record["calls"] == len(env.task(record["task_id"]).details["actions"])  # the agent's calls only
    output, _ = _eval(
        tmp_path, "silent", "--user", "retail_scripted", "--limit", "5"
    )  # the same, but the user never acts
    assert "average reward [95% CI]             │ 0.000" in output


def test_trajectory_keeps_the_execution_order_of_both_sides(tau2_envs, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tau2_envs("telecom")
    task = next(t for t in env.tasks("base") if len(t.details["actions"]) >= 2 and t.details["user_actions"])
    scored = []
    reward = env.reward
    monkeypatch.setattr(
        env, "reward", lambda state, messages: scored.append((state, messages)) or reward(state, messages)
    )
    agent = ReplayAgent.for_task(env, task, calls_per_turn=1)  # asks before each call, so the user acts between
    record = asyncio.run(run_conversation(env, task, agent, Tau2ScriptedUser()))
    assert record.reward == 1.0 and record.end_reason == "user_done"
    ((state, messages),) = scored
    executed = [(call.requestor, call.name) for _, call, _ in state.calls]
    users = [("user", a["name"]) for a in task.details["user_actions"]]
    assert executed[1 : 1 + len(users)] == users  # the user acted after the agent's first call
    trajectory = to_trajectory(messages, state.calls)
    placed = [(m.role, call.name) for m in trajectory for call in getattr(m, "tool_calls", None) or ()]
    assert placed == executed
    first_call = next(i for i, m in enumerate(trajectory) if m.role == "user" and m.tool_calls)
    said = next(i for i, m in enumerate(trajectory) if m.role == "user" and m.content == DID)
    assert first_call < said


def test_user_calls_go_before_the_words_of_their_own_turn_when_the_agent_made_no_call(tau2_envs) -> None:
    env = tau2_envs("telecom")
    task = next(t for t in env.tasks("base") if t.details["user_actions"])
    state = env.reset(task)
    (call,) = [c for c in user_calls(task)][:1]
    env.user_call(state, call)
    messages = [user("my phone has no signal"), assistant("Please try that on your phone."), user(DID)]
    roles = [(m.role, bool(getattr(m, "tool_calls", None)), m.content) for m in to_trajectory(messages, state.calls)]
    assert roles[0] == ("user", False, "my phone has no signal")
    assert roles[1] == ("assistant", False, "Please try that on your phone.")
    assert roles[2][:2] == ("user", True) and roles[3][0] == "tool"
    assert roles[4] == ("user", False, DID)


# judge_context_length: τ² asks its judge only about a conversation the user or the agent ended
SCORED = ("user_done", "terminated", "judge_context_length")


@pytest.mark.parametrize(("ended", "scored"), [(None, True), *((e, e in SCORED) for e in TERMINATION)])
def test_a_conversation_cut_short_scores_zero(tau2_envs, ended: str | None, scored: bool) -> None:
    env = tau2_envs("telecom")
    task = env.tasks("base")[0]
    state, messages = run_josh(env, task, gold_script(task), gold_closing(task))
    state.ended = ended
    assert env.reward(state, messages) == (1.0 if scored else 0.0)
    assert env.reward(state.fork(), messages) == (1.0 if scored else 0.0)


def test_eval_cut_off_at_max_turns_scores_zero(tmp_path) -> None:
    output, records = _eval(tmp_path, "cut", "--user", "tau2_scripted", "--max-turns", "1", "--limit", "2")
    assert {r["end_reason"] for r in records} == {"max_turns"} and {r["reward"] for r in records} == {0.0}
    assert all(any(m["role"] == "user" and m.get("tool_calls") for m in r["transcript"]) for r in records)  # all done
    assert "average reward [95% CI]             │ 0.000" in output
