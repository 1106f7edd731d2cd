"""TRL's own arguments in a recipe: the optim keys carry TRL's names, each method section's ``trl:`` mapping reaches
the TRL config josh builds, and what cannot pass through is refused before anything runs (no model is loaded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from josh.loop.recipe import load_loop_recipe
from josh.training import dpo, kto, sft, tree
from josh.training.grpo import trainer as grpo
from josh.training.recipe import RecipeError, SFTSpec, TrainRecipe, build_recipe
from josh.training.trl_args import CONFIG_CLASSES, problem

LABELS = (3, 1)  # desirable, undesirable rows of a KTO data file
# each method's TRL config as josh builds it, and the arguments josh sets in it
BUILDERS = {
    "sft": (sft.config, sft.arguments),
    "kto": (lambda r, out: kto.config(r, out, LABELS), lambda r, out: kto.arguments(r, out, LABELS)),
    "dpo": (dpo.config, dpo.arguments),
    "tree": (tree.config, tree.arguments),
    "grpo": (grpo.config, grpo.grpo_arguments),
}
GROUPS = ["optim.per_device_train_batch_size=4"]  # GRPO's batch holds whole groups of grpo.num_generations (4)


def recipe_for(method: str, *settings: str) -> TrainRecipe:
    return build_recipe({"method": method}, [*GROUPS, *settings])


@pytest.mark.parametrize("method", list(BUILDERS))
def test_a_trl_argument_reaches_the_trl_config_josh_builds(method: str, tmp_path: Path) -> None:
    recipe = recipe_for(method, f"{method}.trl.dataloader_num_workers=3", "optim.num_train_epochs=2")
    built = BUILDERS[method][0](recipe, tmp_path)
    assert type(built).__name__ == CONFIG_CLASSES[method]
    assert (built.dataloader_num_workers, built.num_train_epochs) == (3, 2)
    plain = BUILDERS[method][0](recipe_for(method), tmp_path)
    assert plain.dataloader_num_workers == 0  # TRL's default when the recipe passes nothing


def test_a_method_specific_trl_argument_reaches_its_config(tmp_path: Path) -> None:
    recipe = recipe_for("kto", "kto.trl.loss_type=apo_zero_unpaired", "kto.trl.disable_dropout=false")
    built = kto.config(recipe, tmp_path, LABELS)
    assert (built.loss_type, built.disable_dropout, built.beta) == ("apo_zero_unpaired", False, recipe.kto.beta)


@pytest.mark.parametrize("method", list(BUILDERS))
def test_every_argument_josh_sets_is_refused_in_trl_with_what_sets_it(method: str, tmp_path: Path) -> None:
    recipe = recipe_for(method)
    josh_sets = BUILDERS[method][1](recipe, tmp_path)
    for key, value in josh_sets.items():
        line = problem(recipe, method, key, value, ())
        assert line is not None and line.startswith(f"{method}.trl.{key}: josh sets {key} "), (key, line)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("sft.trl.dataloader_num_worker=2", "unknown key 'sft.trl.dataloader_num_worker', not an argument of TRL's "
         "SFTConfig: did you mean 'dataloader_num_workers'?"),
        ("kto.trl.warmup_ratio=0.1", "unknown key 'kto.trl.warmup_ratio', not an argument of TRL's KTOConfig: did "
         "you mean 'optim.warmup_steps'?"),
        ("kto.trl.beta=0.2", "kto.trl.beta: josh sets beta from 'kto.beta': give it there"),
        ("sft.trl.num_train_epochs=3", "sft.trl.num_train_epochs: josh sets num_train_epochs from "
         "'optim.num_train_epochs'"),
        ("tree.trl.packing=true", "tree.trl.packing: josh sets packing itself (off: the tree loss weights each row"),
        ("grpo.trl.use_vllm=true", "grpo.trl.use_vllm: josh sets use_vllm itself (from grpo.generation)"),
        ("dpo.trl.dataloader_num_workers=many", "dpo.trl.dataloader_num_workers: Input should be a valid integer"),
    ],
)  # fmt: skip
def test_what_cannot_pass_through_to_trl_is_refused(setting: str, message: str) -> None:
    with pytest.raises(RecipeError) as err:
        build_recipe({}, [setting])
    assert message in str(err.value)


def test_a_loop_arm_names_its_trl_problems_by_their_full_path(tmp_path: Path) -> None:
    file = tmp_path / "loop.yaml"
    arm = {"method": "kto", "kto": {"trl": {"beta": 0.2, "desirable_weigth": 1.0}}}
    file.write_text(yaml.safe_dump({"name": "t", "kto": arm}))
    with pytest.raises(RecipeError) as err:
        load_loop_recipe(file)
    assert "kto.kto.trl.beta: josh sets beta from 'kto.kto.beta'" in str(err.value)
    assert "did you mean 'kto.kto.desirable_weight'?" in str(err.value)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("epochs", "num_train_epochs"),
        ("per_device_batch_size", "per_device_train_batch_size"),
        ("warmup", "warmup_steps"),
        ("lr_scheduler", "lr_scheduler_type"),
        ("liger_kernel", "use_liger_kernel"),
    ],
)
def test_a_josh_name_for_a_trl_argument_suggests_trl_s_name(old: str, new: str) -> None:
    with pytest.raises(RecipeError, match=f"unknown key 'optim.{old}': did you mean 'optim.{new}'"):
        build_recipe({"optim": {old: 1}})


def test_a_recipe_built_in_python_is_checked_when_its_config_is_built(tmp_path: Path) -> None:
    recipe = TrainRecipe(sft=SFTSpec(trl={"num_train_epochs": 3}))
    with pytest.raises(RecipeError, match="sft.trl.num_train_epochs: josh sets num_train_epochs"):
        sft.config(recipe, tmp_path)


def test_trl_arguments_need_trl_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without_trl(name: str, *args: Any) -> Any:
        return None if name == "trl" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_trl)
    with pytest.raises(RecipeError, match=r"sft.trl: TRL's arguments are checked against TRL, which is not installed"):
        build_recipe({"sft": {"trl": {"dataloader_num_workers": 2}}})
    assert build_recipe({}).sft.trl == {}  # a recipe without them loads without TRL


def test_the_training_page_s_example_loads_and_reaches_kto_config(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/concepts/training.md").read_text(encoding="utf-8")
    example = page.split("## TRL's own arguments", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    built = kto.config(build_recipe(yaml.safe_load(example)), tmp_path, LABELS)
    assert (built.loss_type, built.dataloader_num_workers, built.warmup_steps) == ("apo_zero_unpaired", 2, 0.1)
