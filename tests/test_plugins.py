"""Entry-point plugins: the example package registers an environment and its user from its own pyproject.toml;
josh eval, rollout and check-env use them by name; a broken plugin is reported by name and the others still work."""

from __future__ import annotations

import json
import logging
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
