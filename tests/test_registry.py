"""josh.registry: one shape for environments, agents, users and backends; errors and help come from the entries."""

from __future__ import annotations

import sys

import pytest
from pydantic import BaseModel, ConfigDict

from josh.agents import AGENTS
from josh.envs import ENVIRONMENTS
from josh.registry import Registry, parse_backend_model
from josh.users import USERS


class Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = 1


def gadget(env: str, *, speed: float = 1.0, tags: list[str] | None = None) -> tuple[str, float, list[str] | None]:
    return env, speed, tags


def test_options_are_read_off_the_builder_and_checked_before_it_runs() -> None:
    things = Registry("thing", "--thing", options_flag="--thing-option", builder_args=1)
    things.register("gadget", gadget, envs=("toolwoz",))
    things.register("widget", lambda env, **o: (env, o), options=Knobs, needs_model=True, aliases=("w",))
    assert list(things.get("gadget").options.model_fields) == ["speed", "tags"]
    assert things.build("gadget", "e", options={"speed": "2.5"}) == ("e", 2.5, None)  # checked, coerced, defaults kept
    assert things.build("W", "e", options={}) == ("e", {})
    with pytest.raises(ValueError, match=r"unknown option depth \(an option of widget\) for the gadget thing "):
        things.build("gadget", "e", options={"depth": 2})
    with pytest.raises(ValueError, match=r"bad option speed='fast' for the gadget thing \(--thing-option\)"):
        things.check("gadget", options={"speed": "fast"})
    with pytest.raises(ValueError, match="the gadget thing runs on toolwoz only, not on environment 'retail'"):
        things.check("gadget", env="retail")
    with pytest.raises(ValueError, match=r"unknown thing 'gizmo' \(--thing\); choose one of gadget, widget"):
        things.get("gizmo")
    assert things.describe() == "widget (LLM) or gadget (scripted)"


def test_modules_of_a_registry_package_register_themselves_on_first_lookup(tmp_path, monkeypatch) -> None:
    package = tmp_path / "plugins"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from josh.registry import Registry\nREG = Registry('plugin', '--plugin', discover=('plugins',))\n"
    )
    (package / "echo.py").write_text(
        "from plugins import REG\nREG.register('echo', lambda text='': text, needs_model=True)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import plugins

    assert "plugins.echo" not in sys.modules
    assert plugins.REG.names() == ["echo"] and "plugins.echo" in sys.modules
    assert plugins.REG.build("echo", options={"text": "hi"}) == "hi"


def test_builtin_entries_carry_what_the_run_needs() -> None:
    # josh's own environments (a plugin a test installed earlier in this process, e.g. the example echo env, is
    # not one of them)
    builtin = {n for n in ENVIRONMENTS.names() if ENVIRONMENTS.get(n).builder.__module__.startswith("josh.")}
    assert builtin == {"toolwoz", "retail", "airline", "tau2-airline", "tau2-retail", "tau2-telecom"}
    assert {n for n in AGENTS.names() if AGENTS.get(n).needs_model} == {"react", "act", "function_calling"}
    assert {n for n in USERS.names() if USERS.get(n).needs_model} == {"goal", "guide", "instruction"}
    assert AGENTS.get("fc").name == "function_calling"
    assert AGENTS.get("oracle").envs == ("toolwoz",) and USERS.get("agenda").envs == ("toolwoz",)
    assert list(USERS.get("agenda").options.model_fields) == ["chunk", "patience"]
    assert "examples" in AGENTS.get("react").options.model_fields
    with pytest.raises(ValueError, match=r"unknown option examples \(an option of react, function_calling, act\)"):
        AGENTS.check("oracle", options={"examples": 2})


def test_cli_help_and_errors_come_from_the_entries(tmp_path) -> None:
    import typer
    from typer.testing import CliRunner

    from josh.cli.main import app

    command = typer.main.get_command(app).commands["eval"]
    command.get_help(command.context_class(command))  # showing help fills in the registries' entries
    helps = {p.name: p.help for p in command.params}
    assert helps["user"] == f"user simulator: {USERS.describe()}" and helps["agent"] == f"agent: {AGENTS.describe()}"
    assert helps["user_options"].endswith(USERS.options_help()) and "(e.g. patience=5)" in helps["user_options"]
    assert helps["env"].endswith("; or openenv:URL, an OpenEnv server")
    assert helps["env_options"].endswith("; openenv:URL: sessions, episodes, seeds")
    args = ["eval", "--env", "retail", "--agent", "oracle", "--user", "retail_scripted", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "the oracle agent runs on toolwoz only" in result.output


def test_parse_backend_model_keeps_colons_in_the_model() -> None:
    assert parse_backend_model("openai:org/model:v2", "--judge") == ("openai", "org/model:v2")
    with pytest.raises(ValueError, match="BACKEND:MODEL"):
        parse_backend_model("hf:", "--judge")
