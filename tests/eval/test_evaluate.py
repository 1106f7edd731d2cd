import json

import pytest

from josh.eval.evaluate import evaluate, load_results
from josh.run.conversation import run_conversation
from josh.types import ErrorCategory
from tests.fakes.conversation import CallingAgent, CountingUser, FakeEnv, make_tasks


async def test_conversation_reaches_full_reward_and_records_transcript():
    env, task = FakeEnv(), make_tasks(1, goals=2)[0]
    rec = await run_conversation(env, task, CallingAgent(), CountingUser(turns=3))
    assert rec.reward == 1.0 and rec.success and rec.completed_goals == [0, 1]
    assert rec.end_reason == "user_done" and rec.turns == 3
    assert [m.role for m in rec.transcript] == ["user", "assistant"] * 3 + ["user"]
    assert rec.calls == 3 and rec.tool_errors == [ErrorCategory.UNKNOWN_TOOL]


async def test_agent_exception_ends_conversation_with_error_not_crash():
    env, task = FakeEnv(), make_tasks(1)[0]
    rec = await run_conversation(env, task, CallingAgent(raise_on={task.id}), CountingUser())
    assert rec.end_reason == "agent_error" and "agent exploded" in rec.error and rec.reward == 0.0


async def test_max_turns_caps_the_conversation():
    env, task = FakeEnv(), make_tasks(1, goals=5)[0]
    rec = await run_conversation(env, task, CallingAgent(), CountingUser(turns=100), max_turns=2)
    assert rec.turns == 2 and rec.end_reason == "max_turns" and rec.reward == pytest.approx(2 / 5)


async def test_evaluate_writes_results_and_summary(tmp_path):
    tasks = make_tasks(6)
    agent = CallingAgent(fail={"t001", "t004"})
    summary = await evaluate(FakeEnv(), tasks, agent, CountingUser(1), tmp_path, trials=2, concurrency=3)
    assert summary.conversations == 12 and summary.trials == 2
    assert summary.average_reward.mean == pytest.approx(4 / 6)
    assert summary.pass_k[2] == pytest.approx(4 / 6)
    assert summary.bad_api_use_share == pytest.approx(4 / 12)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["conversations"] == 12
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 12 and all(json.loads(x)["transcript"] for x in lines)


async def test_resume_after_crash_skips_finished_and_never_duplicates(tmp_path):
    tasks = make_tasks(8)
    await evaluate(FakeEnv(), tasks[:5], CallingAgent(), CountingUser(1), tmp_path)
    with (tmp_path / "results.jsonl").open("a") as f:
        f.write('{"task_id": "t005", "tri')  # a crash mid-write
    calls = []

    class Spy(CallingAgent):
        async def turn(self, history, state, *, n=1):
            calls.append(state.task.id)
            return await super().turn(history, state, n=n)

    summary = await evaluate(FakeEnv(), tasks, Spy(), CountingUser(1), tmp_path)
    assert sorted(calls) == ["t005", "t006", "t007"]
    records = load_results(tmp_path)
    assert sorted(r.task_id for r in records) == [t.id for t in tasks]
    assert summary.conversations == 8 and summary.success_rate.mean == 1.0


async def test_duplicate_task_ids_are_the_same_error_as_in_rollout(tmp_path):
    from josh.run.resumable import DuplicateKeyError

    tasks = make_tasks(2)
    with pytest.raises(DuplicateKeyError, match="task id must appear once.*t000"):
        await evaluate(FakeEnv(), [*tasks, tasks[0]], CallingAgent(), CountingUser(1), tmp_path)
