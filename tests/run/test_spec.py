"""josh.run.spec: one run spec for the CLI's run options, a loop recipe's setup and the component builders."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.options import components_from
from josh.loop.recipe import LoopRecipe, load_loop_recipe
from josh.run.components import ComponentOptions, build_components, check_names
from josh.run.spec import RunSpec
from josh.training.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["eval", "rollout"])
def test_every_field_of_the_spec_is_an_option_of_eval_and_rollout(command: str) -> None:
    params = {p.name for p in typer.main.get_command(app).commands[command].params}
    assert set(RunSpec.model_fields) <= params
    flags = {d for p in typer.main.get_command(app).commands[command].params for d in p.opts}
    assert {"--agent-option", "--user-option", "--llm-option", "--user-base-url"} <= flags


def test_cli_options_reach_the_built_agent_and_user() -> None:
    values = {"agent": "oracle", "agent_options": ["noise=0.25"], "user_options": ["patience=1", "chunk=3"], "limit": 2}
    spec = components_from(values, split="train")
    assert spec.user_options == {"patience": 1, "chunk": 3} and spec.split == "train"
    built = build_components(spec)
    assert built.agent.noise == 0.25 and (built.user.patience, built.user.chunk) == (1, 3) and len(built.tasks) == 2


def test_a_bad_user_option_is_one_line_naming_the_user_and_its_options(tmp_path: Path) -> None:
    args = ["eval", "--agent", "oracle", "--user-option", "patients=2", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "unknown option patients for the agenda user" in result.output
    assert "valid: chunk, patience" in result.output and not (tmp_path / "run").exists()


def test_every_recipe_file_loads_and_names_what_the_registries_know() -> None:
    for path in sorted((ROOT / "recipes").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if "method" in data:
            assert load_recipe(path).method == data["method"]
            continue
        recipe = load_loop_recipe(path)
        check_names(ComponentOptions(**recipe.setup.model_dump()))


def test_a_loop_setup_is_a_run_spec_and_keeps_the_keys_of_older_runs(tmp_path: Path) -> None:
    from josh.loop.stages import StageContext

    recipe = LoopRecipe.model_validate(
        {"name": "r", "output_dir": str(tmp_path), "setup": {"user_options": {"patience": 2}}, "sft": {}}
    )
    assert isinstance(recipe.setup, RunSpec) and recipe.setup.user_options == {"patience": 2}

    def settings(recipe: LoopRecipe) -> dict:
        return StageContext(recipe, trainer=print, builder=print, merger=print, console=None).setup_settings()

    plain = LoopRecipe.model_validate({"name": "r", "output_dir": str(tmp_path), "sft": {}})
    assert set(settings(plain)) == {
        "env", "data", "agent", "backend", "user", "user_backend", "user_model", "base_url", "user_base_url",
        "agent_options",
    }  # fmt: skip
    assert settings(recipe)["user_options"] == {"patience": 2}
