"""The stage contract of ``josh loop`` and the context its stages share.

A stage owns one folder. It says what it runs with (``settings``), what it reads (``inputs``: files, folders or
plain identifiers), what it writes there (``outputs``, which other stages read through the stage object, never by
file name), whether that output is present and whole (``done``), and how to make it (``run``, resumable).
``StageContext.execute`` applies the manifest rules of ``josh.loop.stages.manifest``: a stage finished for the same settings and
inputs is skipped, an unfinished one runs again in place, a changed one moves the old folder aside first. With
``dry=True`` nothing runs: finished stages count as skipped and the first unfinished one raises ``Unfinished``,
which is how a report is rebuilt from a run folder.

Every piece that costs real compute is injected into the context (the trainer, the component builder and the
merger), so the scripted tests run the whole loop without a model. ``served``: the agent's vLLM server, which loads
each adapter before a stage runs it (``josh.loop.served``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from rich.console import Console

from josh.core.env import Env
from josh.core.llm import Sampling
from josh.envs import build_env
from josh.llm.health import require_complete, stop_if_failing
from josh.loop.recipe import LoopRecipe
from josh.loop.result import LoopResult
from josh.loop.served import ServedPolicy
from josh.loop.stages.manifest import Input, run_stage, stage_done
from josh.run.components import ComponentOptions, Components
from josh.run.plan import Bound
from josh.training.recipe import TrainRecipe
from josh.util.jsonl import count_rows, iter_jsonl

Trainer = Callable[[TrainRecipe, bool], Path]
Builder = Callable[[ComponentOptions], Components]
Merger = Callable[[Path, Path, str], Path]
Guard = Callable[[], None]


class Counts(Protocol):
    """What a run's summary says of the pieces it did not finish."""

    pending: int
    failed: int


C = TypeVar("C", bound=Counts)


def complete(summary: Path) -> bool:
    """A run's ``summary.json`` or ``stats.json`` is there and counts nothing ``pending`` (a failed conversation or
    tree, see ``josh.llm.health``, is pending: the stage runs again and redoes it)."""
    try:
        return int(json.loads(summary.read_text(encoding="utf-8")).get("pending") or 0) == 0
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def _kto_labels(paths: list[Path]) -> tuple[int, int]:
    """(desirable, undesirable) rows over KTO files."""
    labels = [bool(row.get("label")) for path in paths if path.is_file() for row in iter_jsonl(path)]
    return sum(labels), len(labels) - sum(labels)


class Unfinished(Exception):
    """A dry run reached a stage that has not finished."""


@dataclass(frozen=True)
class Planned:
    """A stage as ``josh loop --plan`` lists it: whether it would run or be skipped (finished for the same settings
    and inputs), and at most what it costs."""

    name: str
    folder: Path
    runs: bool
    bound: Bound


@dataclass
class StageContext:
    """What every stage of one loop run shares: the recipe, the injected workers, the console and the result."""

    recipe: LoopRecipe
    trainer: Trainer
    builder: Builder
    merger: Merger
    console: Console
    progress: bool = True
    dry: bool = False
    served: ServedPolicy | None = None
    plan: list[Planned] | None = None
    result: LoopResult = field(init=False)
    _to_make: set[Path] = field(default_factory=set, init=False, repr=False)
    _env: Env | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.result = LoopResult(run_dir=self.run_dir, seed=self.recipe.seed)

    @property
    def run_dir(self) -> Path:
        return self.recipe.run_dir

    @property
    def env(self) -> Env:
        if self._env is None:
            self._env = build_env(self.recipe.setup.env, self.recipe.setup.data)
        return self._env

    def log(self, text: str) -> None:
        if not self.dry and self.plan is None:
            self.console.print(text, markup=False, highlight=False)

    def execute(self, stage: Stage) -> None:
        """Run ``stage`` unless it finished for the same settings and inputs (see the module docstring); in a plan,
        only list it (the files a listed stage would make are then taken to hold rows, see ``rows``)."""
        settings, inputs, earlier = stage.settings(), stage.inputs(), stage.earlier_settings()
        if self.plan is not None:
            runs = not stage_done(stage.folder, settings, inputs, stage.done, earlier=earlier)
            self.plan.append(Planned(stage.name, stage.folder, runs, stage.bound() if runs else Bound()))
            if runs:
                self._to_make.update(stage.outputs())
            return
        if self.dry:
            if not stage_done(stage.folder, settings, inputs, stage.done, earlier=earlier):
                raise Unfinished(stage.name)
            self.result.skipped.append(stage.name)
            return
        ran = run_stage(
            stage.name, stage.folder, settings, inputs, stage.run, finished=stage.done, log=self.log, earlier=earlier
        )
        (self.result.ran if ran else self.result.skipped).append(stage.name)

    def rows(self, path: Path) -> int:
        """The rows of a JSONL file a stage made (0 when missing); in a plan, 1 for a file a listed stage would make,
        so that the stages which train on it are listed too."""
        return 1 if path in self._to_make else count_rows(path)

    def kto_labels(self, paths: list[Path]) -> tuple[int, int]:
        """(desirable, undesirable) rows over KTO files; in a plan, (1, 1) when a listed stage would make one."""
        return (1, 1) if self._to_make.intersection(paths) else _kto_labels(paths)

    def options(self, split: str, model: str, sampling: Sampling | None) -> ComponentOptions:
        """The run spec of one stage: its split, model and agent sampling."""
        return ComponentOptions(
            **{**self.recipe.setup.model_dump(), "model": model}, split=split, agent_sampling=sampling
        )

    def components(self, split: str, model: str, sampling: Sampling | None) -> Components:
        """The run spec's env, tasks, agent, user and LLMs for one stage: its split, model and sampling (a served
        agent's model under the name its server answers to)."""
        if self.served is not None:
            model = self.served.name(model)
        return self.builder(self.options(split, model, sampling))

    def setup_settings(self) -> dict[str, Any]:
        """The run spec as the stages that use it record it (the model is their input, not a setting)."""
        config = self.recipe.setup.model_dump(mode="json", exclude={"model"})
        for key in ("llm_options", "user_options", "env_options"):  # absent before they existed: older runs resume
            if not config[key]:
                del config[key]
        return config


class Stage(ABC):
    """One stage of the loop in its own folder; see the module docstring."""

    def __init__(self, ctx: StageContext, name: str, folder: Path) -> None:
        self.ctx, self.name, self.folder = ctx, name, folder

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """What the stage runs with (JSON values); a change reruns it."""

    def inputs(self) -> dict[str, Input]:
        """The files, folders or identifiers it reads; a change in their content reruns it."""
        return {}

    def earlier_settings(self) -> list[dict[str, Any]]:
        """The same settings as earlier versions of josh recorded them (before a key was added), so their run
        folders keep resuming."""
        return []

    @abstractmethod
    def outputs(self) -> list[Path]:
        """The files it writes in its folder."""

    def done(self) -> bool:
        """Whether its output is there and whole (by default: every output file exists)."""
        return all(path.is_file() for path in self.outputs())

    def bound(self) -> Bound:
        """At most what running the stage costs in LLM calls and generated tokens (none by default)."""
        return Bound()

    @abstractmethod
    def run(self) -> None:
        """Make the output (a stage killed half-way runs again and continues where its own resume allows)."""

    def run_on(
        self,
        split: str,
        model: str,
        sampling: Sampling | None,
        work: Callable[[Components, Guard], Coroutine[Any, Any, C]],
    ) -> C:
        """Run ``work`` on the components of ``split``, ``model`` and ``sampling`` with a guard that stops it when
        their backends fail, close them, and raise ``IncompleteRunError`` unless it finished every piece."""
        built = self.ctx.components(split, model, sampling)
        try:
            counts = built.run(work(built, lambda: stop_if_failing(built.llms)))
        finally:
            built.close(cancel=False)  # its backends are done
        require_complete(self.name, counts.pending, counts.failed, "rerun the loop")
        return counts
