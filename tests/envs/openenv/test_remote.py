"""``--env openenv:URL``: josh's evaluation and search on an OpenEnv server, checked against josh's own served
ToolWOZ (mini set, agenda user inside): the same conversations and the same trees as in process (oracle agent). The
server is ``josh env serve``'s app on a thread of this process, one per module (``tests/run/test_openenv_server.py``
runs the command itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openenv", reason="OpenEnv is not installed (the josh-agents[openenv] extra)")

from josh.cli.main import app  # noqa: E402
from josh.envs.openenv import RemoteEnv  # noqa: E402
from josh.types import ToolCall  # noqa: E402
from tests.fakes.openenv import served_app  # noqa: E402


@pytest.fixture(scope="module")
def url():
    from josh.run.openenv_server import build_served, serve_app

    with served_app(serve_app(build_served("toolwoz", "mini", max_turns=30))) as url:
        yield url


def josh(*args: str) -> None:
    done = CliRunner().invoke(app, [*args, "--no-progress"])
    assert done.exit_code == 0, done.output


def rows(path: Path) -> list[dict]:
    return sorted((json.loads(line) for line in path.read_text().splitlines()), key=lambda r: r["task_id"])


def without_ids(value):
    """A record without call ids (fresh random ids on each run) and timings."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ("id", "tool_call_id", "wall_s", "search_s")}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def test_the_search_grows_the_same_trees_on_the_server_as_in_process(url, tmp_path):
    common = ["rollout", "--agent", "oracle", "--split", "test", "--limit", "3", "--beam", "2", "--branching", "2"]
    josh(*common, "--max-depth", "6", "--env", "toolwoz", "--out", str(tmp_path / "local"))
    josh(*common, "--max-depth", "6", "--env", f"openenv:{url}", "--out", str(tmp_path / "remote"))
    local, remote = rows(tmp_path / "local" / "trees.jsonl"), rows(tmp_path / "remote" / "trees.jsonl")
    assert len(local) == 3
    for here, there in zip(local, remote, strict=True):
        assert without_ids(there["nodes"]) == without_ids(here["nodes"]) and there["nodes"]
        assert without_ids({**there, "stats": None}) == without_ids({**here, "stats": None})


def test_an_evaluation_on_the_server_holds_the_same_conversations(url, tmp_path):
    common = ["eval", "--agent", "oracle", "--limit", "3"]
    josh(*common, "--env", "toolwoz", "--out", str(tmp_path / "local"))
    josh(*common, "--env", f"openenv:{url}", "--out", str(tmp_path / "remote"))
    local, remote = rows(tmp_path / "local" / "results.jsonl"), rows(tmp_path / "remote" / "results.jsonl")
    keep = ("task_id", "reward", "end_reason", "messages", "transcript", "completed_goals")
    assert [without_ids({k: r[k] for k in keep}) for r in remote] == [
        without_ids({k: r[k] for k in keep}) for r in local
    ]


def test_a_branch_is_rebuilt_by_replaying_its_actions(url):
    env = RemoteEnv(f"openenv:{url}", sessions=1)
    task = env.tasks("test")[0]
    goal = task.goals[0]
    parent = env.reset(task)
    assert parent.user_says([]) == (parent.user_says([])[0], False)  # the opening, asked twice: two fresh episodes
    env.call(parent, ToolCall(name="search_restaurant", arguments={"area": "nowhere"}))
    left, right = parent.fork(), parent.fork()
    env.call(left, ToolCall(name="search_hotel", arguments={"area": "nowhere"}))
    before = env.replayed
    hit = env.call(right, ToolCall(name=goal.name, arguments=goal.parameters))
    assert env.replayed == before + 1  # one session: right's one earlier call replayed on a fresh episode
    assert hit.completed_goals == (0,) and right.completed == {0} and left.completed == set()
    assert [r.name for r in right.log] == ["search_restaurant", goal.name]


def test_a_server_that_does_not_answer_is_one_line_before_any_work(tmp_path):
    done = CliRunner().invoke(app, ["eval", "--env", "openenv:http://127.0.0.1:9", "--out", str(tmp_path / "run")])
    assert done.exit_code != 0
    assert "the OpenEnv server http://127.0.0.1:9 does not answer /health (ConnectError)" in done.output
    assert not (tmp_path / "run").exists()


def test_what_a_call_on_the_server_reports_agrees(url):
    """The OpenEnv environment overrides ``call`` (the server credits goals): its result, log and goals agree."""
    from josh.envs.agreement import disagreement

    env = RemoteEnv(f"openenv:{url}")
    task = env.tasks("train")[0]
    state = env.reset(task)
    state.user_says([])  # the opening
    calls = [ToolCall(name=g.name, arguments=dict(g.parameters)) for g in task.goals]
    for call in [ToolCall(name="no_such_tool"), *calls, *calls]:
        before, logged = set(state.completed), len(state.log)
        assert disagreement(state, call, env.call(state, call), before, logged) is None
    assert state.completed == set(range(len(task.goals)))
