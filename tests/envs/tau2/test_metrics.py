"""``josh eval``'s pass^1..k on a τ² env equals ``tau2.metrics.agent_metrics`` on the same rewards, with tasks that
fail in some trials and not in others."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from typer.testing import CliRunner

from josh.agents import register_agent
from josh.agents.replay import ReplayAgent
from josh.core.agent import AgentTurn
from josh.core.env import ConversationState
from josh.envs.tau2 import Tau2Env
from josh.types import Message

TRIALS = 3
TASKS = 4


class FlakyReplay(ReplayAgent):
    """The gold replay, except that the ``i``-th task's agent fails the first turn of its first ``i`` conversations
    (whatever order they run in), so pass^k differs from pass^1."""

    seen: Counter[str] = Counter()
    order: list[str] = []

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        if not any(m.role == "assistant" for m in history):
            task = state.task.id
            visit = self.seen[task]
            self.seen[task] += 1
            if visit < self.order.index(task):
                raise RuntimeError("perturbed")
        return await super().turn(history, state, n=n)


def _tau2_results(env: Tau2Env, records: list[dict]) -> Any:
    """τ²'s own ``Results`` holding the rewards and endings of josh's records."""
    from tau2.data_model.simulation import AgentInfo, Info, Results, RewardInfo, SimulationRun, UserInfo
    from tau2.environment.environment import EnvironmentInfo

    tasks = {r["task_id"]: env.tau2_task(env.task(r["task_id"])) for r in records}
    info = Info(
        git_commit="",
        num_trials=TRIALS,
        max_steps=30,
        max_errors=10,
        user_info=UserInfo(implementation="tau2_scripted"),
        agent_info=AgentInfo(implementation="replay"),
        environment_info=EnvironmentInfo(domain_name=env.domain, policy=""),
    )
    runs = [
        SimulationRun(
            id=f"{r['task_id']}-{r['trial']}",
            task_id=tasks[r["task_id"]].id,
            trial=r["trial"],
            start_time="",
            end_time="",
            duration=0.0,
            termination_reason="user_stop" if r["end_reason"] == "user_done" else "agent_error",
            reward_info=RewardInfo(reward=r["reward"]),
            messages=[],
        )
        for r in records
    ]
    return Results(info=info, tasks=list(tasks.values()), simulations=runs)


def test_pass_k_equals_tau2_metrics(tau2_envs, registries, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tau2.metrics.agent_metrics import compute_metrics

    from josh.cli.main import app

    env = tau2_envs("telecom")
    monkeypatch.setattr(FlakyReplay, "order", [t.id for t in env.tasks("base")[:TASKS]])
    monkeypatch.setattr(FlakyReplay, "seen", Counter())
    register_agent("flaky_replay", lambda env, llm: FlakyReplay(env))
    out = tmp_path / "run"
    args = ["eval", "--env", "tau2-telecom", "--split", "base", "--agent", "flaky_replay", "--user", "tau2_scripted"]
    result = CliRunner().invoke(app, [*args, "--limit", str(TASKS), "--trials", str(TRIALS), "--out", str(out)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    per_task = Counter(r["task_id"] for r in records if r["reward"] == 1.0)
    assert [per_task[t] for t in FlakyReplay.order] == [3, 2, 1, 0]  # every task failed as planned, no more
    ours = {int(k): v for k, v in json.loads((out / "summary.json").read_text())["pass_k"].items()}
    tau2 = compute_metrics(_tau2_results(env, records)).pass_hat_ks
    assert sorted(ours) == sorted(tau2) == [1, 2, 3]
    for k in ours:
        assert ours[k] == pytest.approx(tau2[k], abs=1e-12), k
    assert ours[1] > ours[2] > ours[3] > 0.0
