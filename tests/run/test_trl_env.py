"""``josh.run.trl_env``: a josh environment in the shape TRL's ``environment_factory`` takes, on real ToolWOZ with
the agenda user (no model). The slow test runs the example: TRL's GRPOTrainer two steps."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

pytest.importorskip("openenv", reason="OpenEnv is not installed (the josh-agents[openenv] extra)")

from josh.envs import build_env  # noqa: E402
from josh.types import ToolCall  # noqa: E402
from josh.users import make_user  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl-grpo" / "train.py"


@pytest.fixture(scope="module")
def environment():
    from josh.run.trl_env import trl_environment  # OpenEnv's server stack, imported where it is used

    return trl_environment("toolwoz", "mini", max_turns=3)


@pytest.fixture(scope="module")
def toolwoz():
    return build_env("toolwoz", "mini")


def tool_methods(cls) -> dict:
    """The methods TRL exposes as tools (its own rule: public functions of the class but reset and get_reward)."""
    members = inspect.getmembers(cls, predicate=inspect.isfunction)
    return {name: fn for name, fn in members if name not in ("reset", "get_reward") and not name.startswith("_")}


def test_the_tools_trl_reads_are_the_environments_own(environment, toolwoz):
    schemas = {name: get_json_schema(fn)["function"] for name, fn in tool_methods(environment).items()}
    assert set(schemas) == {t["function"]["name"] for t in toolwoz.tools} | {"talk_to_user"}
    for tool in toolwoz.tools:
        want, got = tool["function"], schemas[tool["function"]["name"]]
        assert got["description"] == want["description"]
        assert set(got["parameters"]["properties"]) == set(want["parameters"]["properties"])
        assert set(got["parameters"].get("required", [])) == set(want["parameters"].get("required", []))
        for key, spec in want["parameters"]["properties"].items():
            assert got["parameters"]["properties"][key].get("enum") == spec.get("enum")


def test_an_episode_the_user_answers_and_the_reward_at_the_end(environment, toolwoz):
    task = toolwoz.tasks("train")[0]
    rollout = environment()
    opening = rollout.reset(task_id=task.id, prompt=[{"role": "user", "content": ""}])
    assert opening == environment.served.run(make_user("agenda").reply(task, [])).text
    goal = task.goals[0]
    assert rollout.get_reward() == 0.0
    assert getattr(rollout, goal.name)(**goal.parameters)
    assert rollout.get_reward() == pytest.approx(1 / len(task.goals))
    replies = [rollout.talk_to_user("Anything else?") for _ in range(3)]
    assert all(replies)
    with pytest.raises(RuntimeError, match="episode is over"):
        rollout.talk_to_user("Still there?")
    state = toolwoz.reset(task)
    toolwoz.call(state, ToolCall(name=goal.name, arguments=goal.parameters))
    assert rollout.get_reward() == pytest.approx(toolwoz.reward(state, []))


def test_rows_hold_each_tasks_system_prompt_and_id(environment, toolwoz):
    rows = environment.rows("train", limit=2)
    tasks = toolwoz.tasks("train")[:2]
    assert [r["task_id"] for r in rows] == [t.id for t in tasks]
    assert rows[0]["prompt"][0] == {"role": "system", "content": toolwoz.system_prompt(tasks[0])}


@pytest.mark.slow
def test_the_example_trains_two_grpo_steps(tiny_smollm2, tmp_path):
    """The example's two GRPO steps over ToolWOZ, on SmolLM2's tokenizer and template over a two-layer model of its
    architecture (``tiny_smollm2``): what is tested is TRL's loop on the josh environment; with the 135M weights the
    two 1,800-token sequences per step cost about 4 CPU-minutes (the example's own default)."""
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    done = example.train(str(tmp_path), steps=2, model=str(tiny_smollm2))
    assert done["steps"] == 2
    rewards = [entry for entry in done["log"] if "rewards/ToolwozEnvironment/mean" in entry]
    assert len(rewards) == 2  # the environment's get_reward scored every step
    tasks = {row["task_id"]: row for row in example_rows()}
    assert done["openings"] and set(done["openings"]) <= set(tasks)  # each rollout's episode began with the user
    assert all(done["openings"].values())


def example_rows() -> list[dict]:
    from josh.run.trl_env import trl_environment

    return trl_environment("toolwoz", "mini").rows("train", limit=2)
