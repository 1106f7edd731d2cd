"""Every setting a user writes is checked: an unknown key at any nesting level of a loop or training recipe, or in
any component's options, is refused before anything runs, with its full path.

The cases are generated from the config models and the registries themselves (every field that holds a model, at any
depth, through Optional, lists and dicts; every registered environment, agent, user and backend with its options
model; every ``trl:`` mapping, checked against TRL's config class of its method), so a section or a component added
later is covered without editing this file. A free-form mapping anywhere in a recipe fails the test until the check
knows which registry validates it.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from josh.agents import AGENTS
from josh.envs import ENVIRONMENTS
from josh.llm.factory import BACKENDS
from josh.loop.recipe import LoopRecipe, load_loop_recipe
from josh.registry import Registry
from josh.run.components import ComponentOptions, check_names
from josh.training.recipe import RecipeError, TrainRecipe, build_recipe
from josh.users import USERS
from josh.util.strict import nested_model

UNKNOWN = "zz_not_a_key"
MAX_DEPTH = 4  # TrainRecipe sits inside LoopRecipe: one more level than the deepest model path

# the mappings of a recipe whose keys depend on a name beside them: (registry, the field naming the entry)
OPTIONS: dict[str, tuple[Registry, str]] = {
    "env_options": (ENVIRONMENTS, "env"),
    "agent_options": (AGENTS, "agent"),
    "user_options": (USERS, "user"),
    "llm_options": (BACKENDS, "backend"),
}
TRL = "trl"  # a method section's mapping of TRL config arguments, checked against TRL (josh.training.trl_args)

# every optional section present (warm_kto needs the warm start's KTO rows), so that each is checked
LOOP_BASE: dict[str, Any] = {
    "name": "t",
    "sft": {},
    "warm_start": {"kto_rows": "kto.jsonl"},
    "warm_kto": {"method": "kto"},
}


def model_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every model nested in ``model`` (the root included); a list's items are at index 0, a dict's
    values under the key 'k'."""
    yield prefix
    if len(prefix) >= MAX_DEPTH:
        return
    for name, field in model.model_fields.items():
        inner = nested_model(field.annotation)
        if inner is not None:
            step = {None: (name,), "list": (name, "0"), "dict": (name, "k")}[inner[1]]
            yield from model_paths(inner[0], (*prefix, *step))


def mapping_fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path of the model, field name) of every free-form mapping (``dict[str, Any]``) in ``model``, at any depth."""
    if len(prefix) > MAX_DEPTH:
        return
    for name, field in model.model_fields.items():
        inner = nested_model(field.annotation)
        if inner is not None:
            yield from mapping_fields(inner[0], (*prefix, name, *(("k",) if inner[1] else ())))
        elif typing.get_origin(field.annotation) is dict and typing.get_args(field.annotation)[1] is Any:
            yield prefix, name


def put(data: dict[str, Any], path: tuple[str, ...], value: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with ``value`` merged into the mapping at ``path``, made where missing ('0': a list's first
    item)."""
    out = copy.deepcopy(data)
    node: Any = out
    for part, following in zip(path, (*path[1:], None), strict=False):
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, [{}] if following == "0" else {})
    node.update(value)
    return out


def refused(load: Any, data: dict[str, Any], path: str, tmp_path: Path) -> str:
    with pytest.raises(RecipeError) as err:
        load(data, tmp_path)
    message = str(err.value)
    assert f"'{path}" in message, message
    return message


def load_loop(data: dict[str, Any], tmp_path: Path) -> LoopRecipe:
    file = tmp_path / "loop.yaml"
    file.write_text(yaml.safe_dump(data))
    return load_loop_recipe(file)


def load_train(data: dict[str, Any], tmp_path: Path) -> TrainRecipe:
    return build_recipe(data, source="train.yaml")


RECIPES = [("loop", LoopRecipe, LOOP_BASE, load_loop), ("train", TrainRecipe, {}, load_train)]
MODEL_CASES = [
    pytest.param(load, base, path, id=f"{kind}:{'.'.join(path) or '(top)'}")
    for kind, model, base, load in RECIPES
    for path in model_paths(model)
]


@pytest.mark.parametrize(("load", "base", "path"), MODEL_CASES)
def test_an_unknown_key_in_every_section_is_refused_with_its_path(load, base, path, tmp_path) -> None:
    data = put(base, path, {UNKNOWN: 1})
    full = ".".join([*path, UNKNOWN])
    assert f"unknown key '{full}'" in refused(load, data, full, tmp_path)


def test_every_free_form_mapping_of_a_recipe_is_checked_by_a_registry() -> None:
    unchecked = [
        ".".join([*path, name])
        for _, model, _, _ in RECIPES
        for path, name in mapping_fields(model)
        if name not in OPTIONS and name != TRL
    ]
    assert not unchecked, f"mappings no registry checks: {unchecked}"


def option_cases() -> Iterator[Any]:
    """Every (recipe, section with options, registry entry, path inside the entry's options model)."""
    for kind, model, base, load in RECIPES:
        for section, field in mapping_fields(model):
            if field == TRL:
                continue
            registry, name_field = OPTIONS[field]
            for name in registry.names():
                entry = registry.get(name)
                env = {} if entry.envs is None or registry is ENVIRONMENTS else {"env": entry.envs[0]}
                for inner in model_paths(entry.options, ()):
                    case = (load, base, section, field, {name_field: name, **env}, inner)
                    yield pytest.param(*case, id=f"{kind}:{'.'.join(section)}.{field}[{name}]{'.'.join(inner)}")


@pytest.mark.parametrize(("load", "base", "section", "field", "names", "inner"), list(option_cases()))
def test_an_unknown_option_of_every_component_is_refused_with_its_path(
    load, base, section, field, names, inner, tmp_path
) -> None:
    data = put(base, section, names)
    data = put(data, (*section, field, *inner), {UNKNOWN: 1})
    full = ".".join([*section, field, *inner, UNKNOWN])
    refused(load, data, full, tmp_path)


TRL_CASES = [
    pytest.param(load, base, section, id=f"{kind}:{'.'.join(section)}.trl")
    for kind, model, base, load in RECIPES
    for section, field in mapping_fields(model)
    if field == TRL
]


@pytest.mark.parametrize(("load", "base", "section"), TRL_CASES)
def test_an_unknown_trl_argument_in_every_section_is_refused_with_its_path(load, base, section, tmp_path) -> None:
    full = ".".join([*section, TRL, UNKNOWN])
    message = refused(load, put(base, (*section, TRL), {UNKNOWN: 1}), full, tmp_path)
    assert f"unknown key '{full}', not an argument of TRL's" in message


@pytest.mark.parametrize(
    ("flag_field", "registry"), [(field, registry) for field, (registry, _) in OPTIONS.items()], ids=list(OPTIONS)
)
def test_an_unknown_command_line_option_is_refused_for_every_component(flag_field, registry) -> None:
    for name in registry.names():
        entry = registry.get(name)
        name_field = OPTIONS[flag_field][1]
        env = entry.envs[0] if entry.envs and registry is not ENVIRONMENTS else "toolwoz"
        spec = {"env": env, name_field: name, flag_field: {UNKNOWN: 1}}
        if registry is ENVIRONMENTS:
            spec["env"] = name
        with pytest.raises(ValueError, match=f"unknown option {UNKNOWN} for the {entry.name}"):
            check_names(ComponentOptions(**spec))


def test_a_misspelt_key_names_the_closest_valid_one(tmp_path) -> None:
    data = put(LOOP_BASE, ("rollout", "search"), {"max_bean": 4})
    data = put(data, ("warm_start",), {"demos": 3})
    data = put(data, ("setup", "agent_options"), {"max_generatoins": 2})
    message = refused(load_loop, data, "rollout.search.max_bean", tmp_path)
    assert "did you mean 'rollout.search.max_beam'?" in message
    assert "unknown key 'warm_start.demos' (valid here: enabled, tasks," in message
    assert "for the react agent: did you mean 'setup.agent_options.max_generations'?" in message  # in the same error


def test_a_command_line_override_is_checked_like_the_file(tmp_path) -> None:
    file = tmp_path / "loop.yaml"
    file.write_text(yaml.safe_dump(LOOP_BASE))
    with pytest.raises(RecipeError, match="unknown key 'extract.min_rewrd': did you mean 'extract.min_reward'"):
        load_loop_recipe(file, ["extract.min_rewrd=1.0"])
    with pytest.raises(RecipeError, match="unknown key 'setup.user_options.patiense' for the agenda user"):
        load_loop_recipe(file, ["setup.user_options.patiense=2"])


def test_shipped_recipes_load_and_each_misspelt_key_is_refused(tmp_path) -> None:
    """Every key of every shipped recipe misspelt in turn (two letters inserted after its first): each is refused."""
    root = Path(__file__).resolve().parents[1] / "recipes"
    silent = []
    for file in sorted(root.glob("*.yaml")):
        data = yaml.safe_load(file.read_text())
        load = load_loop if "name" in data else load_train
        load(data, tmp_path)
        for path in key_paths(data):
            *parents, key = path
            bad = copy.deepcopy(data)
            node = bad
            for part in parents:
                node = node[part]
            node[key[:1] + "zq" + key[1:]] = node.pop(key)
            try:
                load(bad, tmp_path)
            except RecipeError:
                continue
            silent.append(f"{file.name}: {'.'.join(path)}")
    assert not silent, silent


def key_paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from key_paths(value, (*prefix, key))


def test_the_settings_of_a_judge_an_environment_names_are_checked(tmp_path) -> None:
    judged = {"env": "tau2-retail", "agent": "react", "user": "instruction"}
    judged["env_options"] = {"judge": "openai:gpt-4.1", "judge_options": {"base_url": "http://x/v1", "max_retrys": 2}}
    data = put(LOOP_BASE, ("setup",), judged)
    data.pop("warm_start"), data.pop("warm_kto")
    message = refused(load_loop, data, "setup.env_options.judge_options.max_retrys", tmp_path)
    assert "for the openai backend: did you mean 'setup.env_options.judge_options.max_retries'?" in message
