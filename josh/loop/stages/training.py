"""The training stage: one arm's recipe on the concatenation of its row files (``data.jsonl``), a fresh adapter on
the base model (or on a full model folder ``base``), or the adapter ``start`` trained further. An arm whose rows
cannot be trained on ends with the reason in ``ended.txt`` and no model; the loop goes on."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from josh.loop.stages.base import Stage, StageContext
from josh.loop.stages.manifest import Input
from josh.training.data import DatasetError
from josh.training.recipe import RecipeError, TrainRecipe
from josh.training.runner import last_checkpoint, train
from josh.training.trl_args import CONFIG_CLASSES as TRL_CONFIGS
from josh.util.atomic import write_atomic
from josh.util.layout import METRICS, TRAIN_DATA
from josh.util.layout import TRAIN_ENDED as ENDED


def train_with_trl(recipe: TrainRecipe, resume: bool) -> Path:
    """The real trainer (TRL + PEFT); tests inject a cheaper one."""
    return train(recipe, resume=resume)


class TrainStage(Stage):
    """Train ``arm`` with ``method`` on ``sources`` into ``folder``; see the module docstring."""

    def __init__(
        self,
        ctx: StageContext,
        name: str,
        folder: Path,
        arm: TrainRecipe,
        sources: list[Path],
        method: str,
        *,
        start: Path | None = None,
        base: Path | None = None,
        seed_offset: int = 0,
        shuffle: bool = False,
    ) -> None:
        super().__init__(ctx, name, folder)
        self.seed = arm.seed + (ctx.recipe.seed or 0) + seed_offset
        model = arm.model.model_copy(update={"adapter": str(start) if start is not None else None})
        if base is not None:
            model = model.model_copy(update={"name": str(base)})
        self.arm, self.model = arm.model_copy(update={"seed": self.seed}), model
        self.sources, self.method, self.start, self.base, self.shuffle = sources, method, start, base, shuffle
        self.data, self.metrics, self.ended = folder / TRAIN_DATA, folder / METRICS, folder / ENDED

    def settings(self) -> dict[str, Any]:
        skip = {"data": True, "output_dir": True, "run_name": True, "model": {"adapter"}}  # the start is an input
        config: dict[str, Any] = {"train": self.arm.model_dump(mode="json", exclude=skip), "method": self.method}
        if self.shuffle:
            config["shuffle"] = True
        return config

    def earlier_settings(self) -> list[dict[str, Any]]:
        """Recipes took TRL's names for the ``optim`` keys and gained the ``trl:`` mappings, ``optim.min_steps``,
        ``grpo.user_options``, and before them the ``tree`` and ``grpo`` sections: a run recorded with the earlier
        names and without them (at their defaults) is the same run."""
        current = self.settings()
        train = current["train"]
        if train["grpo"]["user_options"] or any(train[method]["trl"] for method in TRL_CONFIGS):
            return []
        current = _before_trl_names(current)
        train = current["train"]
        grpo = {k: v for k, v in train["grpo"].items() if k != "user_options"}
        forms = [current, {**current, "train": {**train, "grpo": grpo}}]
        defaults = _before_trl_names({"train": TrainRecipe().model_dump(mode="json")})["train"]
        if all(train[k] == defaults[k] for k in ("tree", "grpo")):
            forms.append({**current, "train": {k: v for k, v in train.items() if k not in ("tree", "grpo")}})
        if train["optim"]["min_steps"] == 0:
            forms += [_without_min_steps(form) for form in forms]
        return forms

    def inputs(self) -> dict[str, Input]:
        inputs: dict[str, Input] = {f"data{i}": p for i, p in enumerate(self.sources)}
        if self.start is not None:
            inputs["start"] = self.start
        if self.base is not None:
            inputs["base"] = self.base
        return inputs

    def outputs(self) -> list[Path]:
        return [self.data, self.metrics, self.ended]

    def done(self) -> bool:
        return self.metrics.is_file() or self.ended.is_file()

    @property
    def adapter(self) -> Path | None:
        """The trained model folder, or ``None`` when the arm ended without one."""
        return None if self.ended.is_file() else self.folder

    def why_ended(self) -> str:
        return self.ended.read_text(encoding="utf-8").strip() if self.ended.is_file() else "no reason recorded"

    def run(self) -> None:
        self.ended.unlink(missing_ok=True)
        _concat(self.sources, self.data, random.Random(self.seed) if self.shuffle else None)
        if self.metrics.is_file():
            return
        update = {
            "method": self.method,
            "data": self.data,
            "output_dir": self.folder.parent,
            "run_name": self.folder.name,
        }
        try:
            recipe = self.arm.model_copy(update={**update, "model": self.model})
            self.ctx.trainer(recipe, last_checkpoint(self.folder) is not None)
        except (RecipeError, DatasetError) as exc:
            write_atomic(self.ended, f"{exc}\n")


def _concat(sources: list[Path], target: Path, rng: random.Random | None = None) -> None:
    """Concatenate JSONL files (shuffled when ``rng`` is given) into ``target`` at once; a missing one (an extraction
    with no rows of its format) adds nothing."""
    lines: list[str] = []
    for source in sources:
        if not source.is_file():
            continue
        with source.open(encoding="utf-8") as f:
            lines += [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    if rng is not None:
        rng.shuffle(lines)
    write_atomic(target, lines)


BEFORE_TRL_NAMES = {
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "per_device_batch_size",
    "warmup_steps": "warmup",
    "lr_scheduler_type": "lr_scheduler",
    "use_liger_kernel": "liger_kernel",
}


def _before_trl_names(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings as recorded before the ``optim`` keys took TRL's names and the sections their ``trl:`` mappings."""
    train = dict(settings["train"])
    train["optim"] = {BEFORE_TRL_NAMES.get(k, k): v for k, v in train["optim"].items()}
    for method in TRL_CONFIGS:
        train[method] = {k: v for k, v in train[method].items() if k != "trl"}
    return {**settings, "train": train}


def _without_min_steps(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings as recorded before ``optim.min_steps`` existed."""
    optim = {k: v for k, v in settings["train"]["optim"].items() if k != "min_steps"}
    return {**settings, "train": {**settings["train"], "optim": optim}}
