"""Entry-point plugins: the example package registers an environment and its user from its own pyproject.toml;
josh eval, rollout and check-env use them by name; a broken plugin is reported by name and the others still work."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs import ENVIRONMENTS, build_env
from josh.envs.checker import check_env
from josh.loop.arms import PLUGINS, check_arms
from josh.plugins import PluginError
from josh.registry import Registry
from josh.users import USERS


def test_the_example_plugin_registers_by_its_entry_points(echo_plugin: Path) -> None:
    assert USERS.get("echo_user").envs == ("echo",)
    assert "echo" in ENVIRONMENTS.names() and "echo_user" in USERS.describe()
    env = build_env("echo", "default")
    assert env.tasks("train")[0].goals == [] and check_env(env).passed


def test_eval_rollout_and_check_env_run_the_plugin_by_name(echo_plugin: Path, tmp_path: Path) -> None:
    run = ["--env", "echo", "--agent", "replay", "--user", "echo_user", "--split", "train", "--no-progress"]
    result = CliRunner().invoke(app, ["eval", *run, "--out", str(tmp_path / "eval")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["tasks"] == 3 and summary["average_reward"]["mean"] == 1.0
    result = CliRunner().invoke(app, ["rollout", *run, "--out", str(tmp_path / "rollout")])
    assert result.exit_code == 0, result.output
    trees = [json.loads(line) for line in (tmp_path / "rollout" / "trees.jsonl").read_text().splitlines()]
    assert [(t["error"], t["reward"]) for t in trees] == [(None, 1.0)] * 3  # goal-less: ranked by the final reward
    result = CliRunner().invoke(app, ["check-env", "echo"])
    assert result.exit_code == 0 and "fork isolation" in result.output, result.output
    bad = CliRunner().invoke(app, ["eval", "--env", "echo", "--agent", "replay", "--user", "agenda", "--out", "x"])
    assert bad.exit_code != 0 and "runs on toolwoz only, not on environment 'echo'" in bad.output


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_rollout_on_ray_actors_rebuild_the_plugin_by_name(echo_plugin: Path, tmp_path: Path, monkeypatch) -> None:
    """Slow: starts a local Ray cluster (~8 s on 2 cores). The actors are fresh processes that only know the names:
    each finds the plugin's entry points on its own path (the fixture's ``$PYTHONPATH``; a pip-installed plugin is
    in the interpreter's site-packages) and builds env and user from them; the driver searches nothing."""
    pytest.importorskip("ray")
    from josh.search.distributed import ActorPool

    hosts: list[str] = []
    ready = ActorPool.wait_ready
    monkeypatch.setattr(ActorPool, "wait_ready", lambda pool: hosts.extend(ready(pool)) or hosts)
    out = tmp_path / "ray"
    run = ["--env", "echo", "--agent", "replay", "--user", "echo_user", "--split", "train", "--beam", "2"]
    ray = ["--ray", "local", "--actors", "2", "--cpus-per-actor", "0.5", "--concurrency", "1"]
    result = CliRunner().invoke(app, ["rollout", *run, *ray, "--no-progress", "--out", str(out)])
    assert result.exit_code == 0, result.output
    trees = _rows(out / "trees.jsonl")
    assert sorted(t["task_id"] for t in trees) == ["echo-train-0", "echo-train-1", "echo-train-2"]
    assert [(t["error"], t["reward"], t["n_goals"]) for t in trees] == [(None, 1.0, 0)] * 3
    assert {f["function"]["name"] for t in trees for f in t["tools"]} == {"shout", "submit"}
    assert len(hosts) == 2 and str(os.getpid()) not in {h.split(":")[1] for h in hosts}  # built in the actors


def test_a_loop_recipe_names_the_plugin(echo_plugin: Path, tmp_path: Path) -> None:
    """``josh loop`` on the plugin's environment with its scripted user and the replay agent: baseline evaluation,
    one round of rollouts and extraction. The only arm is KTO, which needs bad turns the replay agent never makes,
    so nothing is trained (``setup.model`` and the arm's model name only have to agree; no model is loaded)."""
    recipe = tmp_path / "echo.yaml"
    recipe.write_text(
        f"name: echo\noutput_dir: {tmp_path}\n"
        "setup: {env: echo, agent: replay, user: echo_user, model: smollm2}\n"
        "rollout: {split: train, search: {max_beam: 2, branching: 2, max_depth: 4}}\n"
        "eval: {split: test, max_turns: 4}\n"
        "kto: {method: kto, model: {name: smollm2}}\n"
    )
    result = CliRunner().invoke(app, ["loop", "-r", str(recipe), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "3 stage(s) ran" in result.output and "KTO needs good and bad turns" in result.output
    run_dir = tmp_path / "echo"
    evaluated = _rows(run_dir / "round-0" / "baseline" / "results.jsonl")
    assert sorted((r["task_id"], r["reward"]) for r in evaluated) == [("echo-test-0", 1.0), ("echo-test-1", 1.0)]
    trees = _rows(run_dir / "round-1" / "rollouts" / "trees.jsonl")
    assert sorted(t["task_id"] for t in trees) == ["echo-train-0", "echo-train-1", "echo-train-2"]
    sft = _rows(run_dir / "round-1" / "extract" / "sft.jsonl")
    submitted = {
        c["function"]["arguments"]["answer"] for row in sft for m in row["messages"] for c in m.get("tool_calls", [])
    }
    assert submitted == {"APPLE", "RIVER", "STONE"}  # the ideal paths through the plugin's train tasks
    assert "| base |" in (run_dir / "report.md").read_text()


def test_a_fresh_interpreter_finds_the_plugin_in_help(echo_plugin: Path) -> None:
    """What a Ray actor or any other process sees: the entry points of the packages on its path."""
    result = subprocess.run(
        [sys.executable, "-m", "josh", "eval", "--help"], capture_output=True, text=True, check=True, env=None
    )
    assert "echo" in result.stdout and "echo_user" in result.stdout


def test_a_broken_plugin_is_reported_by_name(tmp_path: Path, monkeypatch, caplog) -> None:
    dist = tmp_path / "broken_josh_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-josh-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[josh.test_things]\nbroken = no_such_module_49:register\nsilent = json:JSONDecoder\n"
        "[josh.arms]\nbroken_arm = no_such_module_49:ARM\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(PLUGINS, "broken", {})
    things = Registry("thing", "--thing", group="josh.test_things")
    things.register("widget", lambda: "w")
    with caplog.at_level(logging.WARNING, logger="josh.plugins"):
        assert things.names() == ["widget"]  # listing still works
    assert "plugin 'broken' (josh.test_things = no_such_module_49:register from broken-josh-plugin 0.1) failed" in (
        caplog.text
    )
    with pytest.raises(
        PluginError, match="plugin 'broken' .* ModuleNotFoundError: No module named 'no_such_module_49'"
    ):
        things.get("broken")
    with pytest.raises(PluginError, match="plugin 'silent' .* LookupError: it registered no josh.test_things entry"):
        things.get("silent")
    assert things.build("widget") == "w"
    recipe = type("Recipe", (), {"arms": {"broken_arm": {}}})()
    with pytest.raises(PluginError, match="plugin 'broken_arm' \\(josh.arms = no_such_module_49:ARM"):
        check_arms(recipe)


def test_a_failed_discovery_import_is_not_marked_discovered() -> None:
    things = Registry("thing", "--thing", discover=("no_such_module_49",))
    for _ in range(2):  # the second lookup fails the same way, never with an empty registry
        with pytest.raises(ModuleNotFoundError):
            things.get("widget")
