"""The scripted loop (``josh.loop.runner`` without a model): ``builder`` builds the oracle agent with a noise its
"checkpoint" sets (``searching_builder`` notes what searched), ``StubTrainer`` / ``RecordingTrainer`` and ``merger`` stand in for TRL and PEFT, ``recipe`` is a
small loop recipe over the mini set, ``hopeless`` a builder whose searches find nothing to reward."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

from josh.loop.recipe import LoopRecipe
from josh.run.components import ComponentOptions, Components, build_env
from josh.training.recipe import RecipeError
from tests.fakes.conversation import Apologetic

BASE_NOISE = 0.8


def _noise(model: str) -> float:
    skill = pathlib.Path(model) / "skill.json"
    return json.loads(skill.read_text())["noise"] if skill.is_file() else BASE_NOISE


def builder(options: ComponentOptions) -> Components:
    """The oracle acts, dropping an argument of a goal call with a probability set by the 'checkpoint'."""
    from josh.agents import make_agent
    from josh.users import make_user

    env = build_env(options.env, options.data)
    agent = make_agent("oracle", env, noise=_noise(options.model or ""), seed=1)
    return Components(env=env, tasks=env.tasks(options.split), agent=agent, user=make_user("agenda"), llms=[])


def searching_builder(searched: list[str]) -> Callable[[ComponentOptions], Components]:
    """``builder``, noting in ``searched`` the model of every search (the components built on the train split)."""

    def recording(options: ComponentOptions) -> Components:
        if options.split == "train":
            searched.append(str(options.model))
        return builder(options)

    return recording


class StubTrainer:
    """Records its calls; writes the run files a real trainer leaves, with less noise the more rows it saw."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[tuple[str, int, bool]] = []
        self.starts: list[str | None] = []
        self.fail_on = fail_on

    def __call__(self, recipe: Any, resume: bool) -> pathlib.Path:
        rows = sum(1 for line in pathlib.Path(recipe.data).read_text().splitlines() if line.strip())
        self.calls.append((recipe.run_name, rows, resume))
        self.starts.append(recipe.model.adapter)
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise KeyboardInterrupt("killed during training")
        run = recipe.output_dir / recipe.run_name
        start = _noise(recipe.model.adapter or recipe.model.name)  # a continued adapter or a merged model
        (run / "skill.json").write_text(json.dumps({"noise": max(0.0, start - 0.02 * rows)}))
        metrics = {"rows": rows, "global_step": rows, "train_loss": 0.5, "train_runtime_s": 0.1}
        (run / "metrics.json").write_text(json.dumps(metrics))
        return run


def merger(adapter: pathlib.Path, out: pathlib.Path, dtype: str) -> pathlib.Path:
    """Stands in for PEFT's merge: the merged 'model' has the adapter's skill."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "skill.json").write_text((adapter / "skill.json").read_text())
    (out / "config.json").write_text(json.dumps({"merged_from": str(adapter), "dtype": dtype}))
    return out


def recipe(tmp_path: pathlib.Path, **changes: Any) -> LoopRecipe:
    arm = {"model": {"name": "base"}, "max_length": 512}
    data = {
        "name": "scripted",
        "output_dir": str(tmp_path),
        "setup": {"agent": "act", "backend": "scripted", "model": "base", "agent_options": {"examples": 0}},
        "warm_start": {"tasks": 6},
        "rollout": {"skip": 6, "tasks": 10, "search": {"max_beam": 4, "branching": 2, "max_depth": 10}},
        "eval": {"split": "test", "limit": 10, "max_turns": 10, "trials": 2},
        "sft": arm,
        "kto": {**arm, "method": "kto"},
        **changes,
    }
    return LoopRecipe.model_validate(data)


class RecordingTrainer(StubTrainer):
    """A stub trainer that also keeps every recipe it was given."""

    def __init__(self, refuse: str | None = None) -> None:
        super().__init__()
        self.recipes: dict[str, Any] = {}
        self.refuse = refuse

    def __call__(self, recipe: Any, resume: bool) -> pathlib.Path:
        self.recipes[str(recipe.output_dir / recipe.run_name)] = recipe
        if recipe.run_name == self.refuse:
            self.calls.append((recipe.run_name, 0, resume))
            raise RecipeError(f"KTO has 1 rows, fewer than one batch of {recipe.optim.per_device_train_batch_size}")
        return super().__call__(recipe, resume)


def lines(path: pathlib.Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def hopeless(options: ComponentOptions) -> Components:
    """Searches find nothing to reward; evaluations are the usual noisy oracle."""
    built = builder(options)
    if options.split == "train":
        built.agent = Apologetic()
    return built
