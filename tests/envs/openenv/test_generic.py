"""``--env openenv:URL`` on someone else's environment: a third-party-style OpenEnv server built only from OpenEnv's
own classes (``tests/fakes/counter_env.py``: MCP tools, OpenEnv's MCP actions, no task API, no user), served on a
thread of this process (one per module). Tasks are episodes by seed, the reward is the server's at ``done``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openenv", reason="OpenEnv is not installed (the josh-agents[openenv] extra)")

from josh.cli.main import app  # noqa: E402
from josh.envs.openenv import RemoteEnv  # noqa: E402
from josh.types import ErrorCategory, ToolCall  # noqa: E402
from tests.fakes import counter_rules  # noqa: E402
from tests.fakes.counter_rules import STEP_REWARD, target  # noqa: E402
from tests.fakes.openenv import served_app  # noqa: E402

ADD_3_AND_SUBMIT = "calls=[{name: add, arguments: {n: 3}}, {name: submit, arguments: {}}]"


@pytest.fixture(scope="module")
def url():
    from tests.fakes.counter_env import counter_app  # OpenEnv's server stack, imported where it is served

    with served_app(counter_app()) as url:
        yield url


def josh(*args: str) -> None:
    done = CliRunner().invoke(app, [*args, "--no-progress"])
    assert done.exit_code == 0, done.output


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tools_over_mcp_and_tasks_as_episodes_by_seed(url):
    env = RemoteEnv(f"openenv:{url}", episodes=3)
    assert env.name == "counter" and not env.server.has_user and env.server.splits is None
    assert env.outcome_reward and env.goal_tools == frozenset()
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in env.tools}
    assert set(tools) == {"add", "submit"} and tools["add"]["properties"] == {"n": {"type": "integer"}}
    assert [t.id for t in env.tasks("test")] == ["seed-0", "seed-1", "seed-2"]
    assert [t.details["seed"] for t in env.tasks("train")] == [3, 4, 5]
    assert [t.id for t in RemoteEnv(f"openenv:{url}", seeds=[7, 1]).tasks("test")] == ["seed-7", "seed-1"]
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        env.tasks("dev")


def test_an_evaluation_scores_each_seed_by_the_servers_reward_at_done(url, tmp_path):
    josh("eval", "--env", f"openenv:{url}", "--agent", "replay", "--agent-option", ADD_3_AND_SUBMIT,
         "--limit", "4", "--out", str(tmp_path))  # fmt: skip
    results = sorted(rows(tmp_path / "results.jsonl"), key=lambda r: r["task_id"])
    assert [r["task_id"] for r in results] == [f"seed-{s}" for s in range(4)]
    wanted = [1.0 if target(s) == 3 else 0.0 for s in range(4)]
    assert [r["reward"] for r in results] == wanted and 0.0 < sum(wanted) < 4  # both outcomes occur
    for seed, row in enumerate(results):
        opening, *turn = row["messages"]
        assert opening == {**opening, "role": "user", "content": f"Make the total {target(seed)}, then submit."}
        assert [m["content"] for m in turn if m["role"] == "tool"] == ["3", "submitted 3"]
        assert row["end_reason"] == "terminated"  # submit ended the episode on the server


def test_without_a_user_the_agents_words_end_the_conversation(url, tmp_path):
    """The agent speaks after one call: nobody answers, the conversation ends before ``done``, and its reward is the
    sum of its steps' rewards (the one ``add``)."""
    josh("eval", "--env", f"openenv:{url}", "--agent", "replay", "--agent-option", ADD_3_AND_SUBMIT,
         "--agent-option", "calls_per_turn=1", "--limit", "2", "--out", str(tmp_path))  # fmt: skip
    for row in rows(tmp_path / "results.jsonl"):
        assert row["reward"] == pytest.approx(STEP_REWARD)
        assert row["messages"][-1]["content"].startswith("Next I will call submit")
        assert [m["role"] for m in row["messages"]].count("user") == 1  # the opening only


def test_the_search_scores_every_branch_by_the_servers_reward(url, tmp_path):
    josh("rollout", "--env", f"openenv:{url}", "--agent", "replay", "--agent-option", ADD_3_AND_SUBMIT,
         "--split", "test", "--limit", "3", "--beam", "2", "--branching", "2", "--out", str(tmp_path))  # fmt: skip
    trees = sorted(rows(tmp_path / "trees.jsonl"), key=lambda t: t["task_id"])
    assert [t["task_id"] for t in trees] == ["seed-0", "seed-1", "seed-2"]
    for seed, tree in enumerate(trees):
        wanted = 1.0 if target(seed) == 3 else 0.0
        assert tree["error"] is None and tree["reward"] == wanted and tree["success"] == (wanted == 1.0)
        root, *children = tree["nodes"]
        assert root["user"] == f"Make the total {target(seed)}, then submit."
        assert len(children) == 2 and all(c["reward"] == wanted and c["ended"] for c in children)
        assert [c["ideal"] for c in children] == ([True, False] if wanted else [False, False])


def test_a_branch_is_rebuilt_on_a_fresh_episode_of_the_same_seed(url):
    env = RemoteEnv(f"openenv:{url}", sessions=1)
    task = next(t for t in env.tasks("test") if target(t.details["seed"]) == 5)
    parent = env.reset(task)
    assert parent.user_says([]) == ("Make the total 5, then submit.", False)
    env.call(parent, ToolCall(name="add", arguments={"n": 2}))
    left, right = parent.fork(), parent.fork()
    assert env.call(left, ToolCall(name="add", arguments={"n": 1})).content == "3"
    before = env.replayed
    assert env.call(right, ToolCall(name="add", arguments={"n": 3})).content == "5"  # 2 + 3, not 3 + 3
    assert env.replayed == before + 1  # one session: right's earlier add replayed on a fresh episode of seed 1
    done = env.call(right, ToolCall(name="submit", arguments={}))
    assert done.terminal and right.terminated and env.reward(right, []) == 1.0
    assert not left.terminated and env.reward(left, []) == pytest.approx(2 * STEP_REWARD)


def test_a_bad_call_is_that_calls_error(url):
    env = RemoteEnv(f"openenv:{url}", sessions=1)
    state = env.reset(env.tasks("test")[0])
    unknown = env.call(state, ToolCall(name="multiply", arguments={"n": 2}))
    assert unknown.error is ErrorCategory.UNKNOWN_TOOL and "multiply" in unknown.content
    wrong = env.call(state, ToolCall(name="add", arguments={"n": "two"}))
    assert wrong.error is ErrorCategory.TOOL_ERROR and "valid integer" in wrong.content
    assert env.call(state, ToolCall(name="add", arguments={"n": 2})).content == "2"  # the episode goes on


def test_conversations_wait_on_the_server_at_the_same_time(url, tmp_path, monkeypatch):
    """Each ``add`` on the server returns only once the other conversation's ``add`` has arrived too: both return
    (the server calls run off the event loop, two in flight at once), where one after the other the first would wait
    out the barrier's timeout and both would fail to meet."""
    import threading

    monkeypatch.setattr(counter_rules, "TOGETHER", threading.Barrier(2, timeout=60))
    counter_rules.ADDS.clear()
    josh("eval", "--env", f"openenv:{url}", "--agent", "replay", "--agent-option", ADD_3_AND_SUBMIT,
         "--limit", "2", "--out", str(tmp_path))  # fmt: skip
    assert counter_rules.ADDS == [True, True] and len(rows(tmp_path / "results.jsonl")) == 2


def test_a_task_list_josh_cannot_read_is_one_line():
    from tests.fakes.counter_env import listed_counter_app

    with served_app(listed_counter_app()) as url:
        env = RemoteEnv(f"openenv:{url}")
        assert env.server.splits == ("test",)
        with pytest.raises(ValueError, match=r"lists tasks josh cannot read .*: Field required at \('id',\)"):
            env.tasks("test")


def test_openings_and_tool_answers_of_other_shapes():
    """What other servers may answer: an opening in another field or none, a tool that reports its own error."""
    from josh.envs.openenv.client import opening_text, tool_answer

    assert opening_text({"question": "2+2?", "metadata": {"prompt": "ignored"}, "reward": 0.0}) == "2+2?"
    assert opening_text({"board": [1, 2], "metadata": {}, "reward": 0.0, "done": False}) == '{"board": [1, 2]}'
    assert opening_text({"metadata": {}, "reward": None, "done": False}) == ""
    failed = {
        "tool_name": "t",
        "error": None,
        "result": {"content": [{"type": "text", "text": "no"}], "is_error": True},
    }
    assert tool_answer(failed) == ("no", ErrorCategory.TOOL_ERROR, None)
    structured = {"tool_name": "t", "error": None, "result": {"content": [], "data": {"a": 1}, "is_error": False}}
    assert tool_answer(structured) == ('{"a": 1}', None, {"a": 1})
    assert tool_answer({"role": "tool", "content": "ok", "error": "invalid_value"})[:2] == (
        "ok", ErrorCategory.INVALID_VALUE,
    )  # fmt: skip
