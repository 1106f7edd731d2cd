"""Recipes and the mini set are found from any folder: the working folder's copy first, then josh's own."""

from __future__ import annotations

from pathlib import Path

from josh.loop.demo import demo_recipe
from josh.training.recipe import load_recipe
from josh.util.bundled import CHECKOUT, bundled, recipe_file


def test_a_recipe_path_falls_back_to_josh_own_copy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert recipe_file("recipes/tiny-sft.yaml") == CHECKOUT / "recipes/tiny-sft.yaml"
    assert load_recipe("recipes/tiny-sft.yaml").model.name == "smollm2"
    assert demo_recipe() == CHECKOUT / "recipes/demo-cpu.yaml"
    assert recipe_file("recipes/none.yaml") == Path("recipes/none.yaml")  # still "not found" when loaded
    assert recipe_file("mine/tiny-sft.yaml") == Path("mine/tiny-sft.yaml")  # only recipes/ falls back
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes/tiny-sft.yaml").write_text("model: {name: mine}\n")
    assert recipe_file("recipes/tiny-sft.yaml") == Path("recipes/tiny-sft.yaml")  # the user's own copy wins


def test_the_mini_set_is_bundled() -> None:
    assert bundled("envs/toolwoz_mini/tasks_test.jsonl") == CHECKOUT / "envs/toolwoz_mini/tasks_test.jsonl"
    assert bundled("envs/nothing") is None
