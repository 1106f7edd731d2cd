"""The stages of ``josh loop``: each owns one folder, writes a manifest (``josh.manifest``) and is skipped when it
already finished for the same settings and inputs. ``josh.loop`` decides which stages run (the arm policy).

Every piece that costs real compute is injected: the trainer (TRL by default), the component builder (models by
name) and the merger (PEFT), so the scripted tests run the whole loop without a model. With ``dry=True`` nothing
runs: finished stages are recorded as if skipped and the first unfinished one raises ``Unfinished``, which is how a
report is rebuilt from a run folder.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from josh.atomic import write_atomic
from josh.components import ComponentOptions, Components, build_components
from josh.envs import build_env
from josh.envs.base import Env
from josh.llm.base import Sampling
from josh.loop_result import Evaluated, LoopResult
from josh.manifest import run_stage, stage_done
from josh.recipes import LoopRecipe, RecipeError, TrainRecipe
from josh.types import Task
from josh.warmstart import WarmStartConfig

Trainer = Callable[[TrainRecipe, bool], Path]
Builder = Callable[[ComponentOptions], Components]
Merger = Callable[[Path, Path, str], Path]
ENDED = "ended.txt"  # a training stage that had nothing usable to train on says why here


def train_with_trl(recipe: TrainRecipe, resume: bool) -> Path:
    """The real trainer (TRL + PEFT); tests inject a cheaper one."""
    from josh.training.runner import train

    return train(recipe, resume=resume)


def merge_with_peft(adapter: Path, out: Path, dtype: str) -> Path:
    """The real merger (PEFT ``merge_and_unload``); tests inject a cheaper one."""
    from josh.merge import merge_adapter

    return merge_adapter(adapter, out, dtype=dtype)


class Unfinished(Exception):
    """A dry run reached a stage that has not finished."""


class Stages:
    """The stage implementations of a ``LoopRecipe``; ``josh.loop.Loop`` strings them together."""

    def __init__(
        self,
        recipe: LoopRecipe,
        *,
        trainer: Trainer = train_with_trl,
        builder: Builder = build_components,
        merger: Merger = merge_with_peft,
        console: Console | None = None,
        progress: bool = True,
        dry: bool = False,
    ) -> None:
        self.recipe = recipe
        self.trainer, self.builder, self.merger = trainer, builder, merger
        self.console = console or Console()
        self.progress = progress
        self.dry = dry
        self.run_dir = recipe.run_dir
        self.result = LoopResult(run_dir=self.run_dir, seed=recipe.seed)
        self._env: Env | None = None

    @property
    def env(self) -> Env:
        if self._env is None:
            self._env = build_env(self.recipe.setup.env, self.recipe.setup.data)
        return self._env

    def log(self, text: str) -> None:
        if not self.dry:
            self.console.print(text, markup=False, highlight=False)

    def _stage(
        self,
        name: str,
        folder: Path,
        config: dict[str, Any],
        inputs: dict[str, Any],
        work: Callable[[], None],
        finished: Callable[[], bool],
    ) -> None:
        if self.dry:
            if not stage_done(folder, config, inputs, finished):
                raise Unfinished(name)
            self.result.skipped.append(name)
            return
        ran = run_stage(name, folder, config, inputs, work, finished=finished, log=self.log)
        (self.result.ran if ran else self.result.skipped).append(name)

    # components -------------------------------------------------------------------------------------------

    def _build(self, split: str, model: str, sampling: Sampling | None) -> Components:
        """Env, tasks, agent, user and LLMs of the recipe's run spec for one stage: its split, model and sampling."""
        spec = self.recipe.setup.model_dump()
        return self.builder(ComponentOptions(**{**spec, "model": model}, split=split, agent_sampling=sampling))

    def prompt_agent(self) -> Any:
        """The agent as it is prompted, without a backend (for its system prompt, protocol and tools)."""
        from josh.agents import agent_prompt

        return agent_prompt(self.recipe.setup.agent, self.env, **self.recipe.setup.agent_options)

    @staticmethod
    def _close(built: Components) -> None:
        for llm in built.llms:
            close = getattr(llm, "close", None)
            if callable(close):
                close()

    def eval_tasks(self) -> list[Task]:
        return self.env.tasks(self.recipe.eval.split)[: self.recipe.eval.limit]

    def rollout_tasks(self, round_: int) -> list[Task]:
        spec = self.recipe.rollout
        tasks = self.env.tasks(spec.split)[spec.skip :]
        if spec.tasks is None:
            return tasks
        start = (round_ - 1) * spec.tasks if spec.new_tasks_each_round else 0
        chosen = tasks[start : start + spec.tasks]
        if not chosen:
            raise ValueError(
                f"round {round_} has no rollout tasks: {len(tasks)} {spec.split} tasks after skip={spec.skip}, "
                f"{spec.tasks} per round"
            )
        return chosen

    def _setup_config(self) -> dict[str, Any]:
        config = self.recipe.setup.model_dump(mode="json", exclude={"model"})
        for key in ("llm_options", "user_options"):  # absent before they existed: older runs keep resuming
            if not config[key]:
                del config[key]
        return config

    def _token_counter(self) -> tuple[Any, str]:
        """Count harvested tokens with the policy's tokenizer when it is a local model, else by whitespace."""
        from josh.extract import hf_token_counter

        if self.recipe.setup.backend not in ("hf", "vllm"):
            return None, "whitespace"
        return hf_token_counter(self.recipe.setup.model), self.recipe.setup.model

    # stages -----------------------------------------------------------------------------------------------

    def evaluate(self, label: str, round_: int, folder: Path, model: str | Path, arm: str) -> None:
        """Evaluate ``model`` on the held-out tasks into ``folder`` (resumable)."""
        from josh.evaluate import SUMMARY, evaluate

        spec = self.recipe.eval

        def work() -> None:
            built = self._build(spec.split, str(model), spec.sampling)
            tasks = built.tasks[: spec.limit]
            try:
                summary = asyncio.run(
                    evaluate(
                        built.env,
                        tasks,
                        built.agent,
                        built.user,
                        folder,
                        trials=spec.trials,
                        concurrency=spec.concurrency,
                        max_turns=spec.max_turns,
                        cost=built.cost,
                        show_progress=self.progress,
                    )  # fmt: skip
                )
            finally:
                self._close(built)
            self.log(
                f"  {label}: average reward {summary.average_reward.mean:.3f}, "
                f"100% success {summary.success_rate.mean:.3f} over {summary.conversations} conversations"
            )

        ids = [t.id for t in self.eval_tasks()]
        config = {"eval": spec.model_dump(mode="json"), "setup": self._setup_config(), "tasks": ids}
        self._stage(f"eval {label}", folder, config, {"model": model}, work, lambda: (folder / SUMMARY).is_file())
        self.result.evaluated.append(Evaluated(label=label, round=round_, folder=folder, arm=arm))

    def warm_start(self, config: WarmStartConfig) -> Path:
        """Scripted demonstrations in the agent's format; returns their SFT file."""
        from josh.warmstart import warm_start

        folder = self.run_dir / "round-0" / "warmstart" / "data"
        data = folder / "sft.jsonl"

        def work() -> None:
            train = self.env.tasks(self.recipe.rollout.split)
            stats = warm_start(self.env, train, self.prompt_agent(), folder, config)
            self.log(f"  {stats.rows} demonstrations from {stats.conversations} scripted conversations")
            if stats.rows == 0:
                raise ValueError("the warm start produced no demonstrations; check warm_start.tasks and the user")

        stage_config = {"warm_start": config.model_dump(mode="json"), "setup": self._setup_config()}
        self._stage("warm-start data", folder, stage_config, {}, work, data.is_file)
        return data

    def train(
        self,
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
    ) -> Path | None:
        """Train one arm on the concatenated ``sources`` into ``folder``: a fresh adapter on the base model (or on
        the full model folder ``base``), or the adapter ``start`` trained further. Returns ``None`` when the data
        could not be trained on (the reason is in ``folder/ended.txt``)."""
        from josh.training.runner import last_checkpoint

        seed = arm.seed + (self.recipe.seed or 0) + seed_offset
        model = arm.model.model_copy(update={"adapter": str(start) if start is not None else None})
        if base is not None:
            model = model.model_copy(update={"name": str(base)})
        arm = arm.model_copy(update={"seed": seed})
        skip = {"data": True, "output_dir": True, "run_name": True, "model": {"adapter"}}  # the start is an input
        config: dict[str, Any] = {"train": arm.model_dump(mode="json", exclude=skip), "method": method}

        def work() -> None:
            from josh.training.data import DatasetError

            (folder / ENDED).unlink(missing_ok=True)
            _concat(sources, folder / "data.jsonl", random.Random(seed) if shuffle else None)
            update = {
                "method": method,
                "data": folder / "data.jsonl",
                "output_dir": folder.parent,
                "run_name": folder.name,
            }
            if (folder / "metrics.json").is_file():
                return
            try:
                self.trainer(arm.model_copy(update={**update, "model": model}), last_checkpoint(folder) is not None)
            except (RecipeError, DatasetError) as exc:
                (folder / ENDED).write_text(f"{exc}\n", encoding="utf-8")

        if shuffle:
            config["shuffle"] = True
        inputs: dict[str, Any] = {f"data{i}": p for i, p in enumerate(sources)}
        if start is not None:
            inputs["start"] = start
        if base is not None:
            inputs["base"] = base
        done = lambda: (folder / "metrics.json").is_file() or (folder / ENDED).is_file()  # noqa: E731
        self._stage(name, folder, config, inputs, work, done)
        if (folder / ENDED).is_file():
            return None
        self.result.trained.append((name, folder))
        return folder

    def merge(self, name: str, adapter: Path, folder: Path, dtype: str) -> Path:
        """The adapter folded into its base model: a full model folder with the adapter's tokenizer."""
        self._stage(
            name, folder, {"dtype": dtype}, {"adapter": adapter}, lambda: self.merger(adapter, folder, dtype),
            lambda: (folder / "config.json").is_file(),
        )  # fmt: skip
        return folder

    def sampling(self, spec_sampling: Sampling | None) -> Sampling | None:
        """The rollout sampling, seeded by the loop's seed when it has one and the recipe set none."""
        seed = self.recipe.seed
        if seed is None or (spec_sampling is not None and spec_sampling.seed is not None):
            return spec_sampling
        return (spec_sampling or Sampling()).model_copy(update={"seed": seed})

    def rollouts(self, round_: int, policy: str | Path) -> Path:
        from josh.rollout import RolloutConfig, run_rollouts

        spec = self.recipe.rollout.model_copy(update={"sampling": self.sampling(self.recipe.rollout.sampling)})
        folder = self.run_dir / f"round-{round_}" / "rollouts"
        tasks = self.rollout_tasks(round_)

        def work() -> None:
            built = self._build(spec.split, str(policy), spec.sampling)
            config = RolloutConfig(search=spec.search, concurrency=spec.concurrency)
            try:
                stats = asyncio.run(
                    run_rollouts(tasks, built.env, built.agent, built.user, folder, config, progress=self.progress)
                )
            finally:
                self._close(built)
            self.log(
                f"  {stats.tasks} trees, {stats.success} reached 100%, mean reward {stats.mean_reward:.3f}, "
                f"{stats.llm_calls} LLM calls, {stats.session_wall_s:.0f} s"
            )

        config = {
            "rollout": spec.model_dump(mode="json"),
            "setup": self._setup_config(),
            "tasks": [t.id for t in tasks],
        }
        done = lambda: (folder / "stats.json").is_file()  # noqa: E731
        self._stage(f"round {round_} rollouts", folder, config, {"policy": policy}, work, done)
        return folder

    def extract(self, round_: int, rollouts: Path, *, control_seed: int | None = None) -> Path:
        """The round's SFT/KTO/DPO rows from its trees; with ``control_seed``, the no-selection control's rows (one
        random branch per tree) instead."""
        from josh.extract import extract, extract_random

        spec = self.recipe.extract
        control = control_seed is not None
        folder = self.run_dir / f"round-{round_}" / ("control-random/data" if control else "extract")

        def work() -> None:
            count, counter = self._token_counter()
            if control:
                stats = extract_random(rollouts, folder, spec, control_seed, count_tokens=count, counter_name=counter)
                self.log(f"  {stats.sft} random branches from {stats.trees} trees ({stats.trimmed} trimmed)")
                return
            stats = extract(rollouts, folder, spec, count_tokens=count, counter_name=counter)
            self.log(
                f"  {stats.accepted}/{stats.trees} trees used ({stats.rewarded} rewarded, {stats.trimmed} trimmed): "
                f"{stats.sft} SFT, {stats.kto_desirable} good + {stats.kto_undesirable} bad KTO rows"
            )

        config: dict[str, Any] = {"extract": spec.model_dump(mode="json"), "agent": self.recipe.setup.agent}
        if control:
            config["random_branch_seed"] = control_seed
        name = f"round {round_} {'control-random data' if control else 'extract'}"
        inputs = {"trees": rollouts / "trees.jsonl"}
        self._stage(name, folder, config, inputs, work, (folder / "sft.jsonl").is_file)
        return folder


def count_rows(paths: list[Path]) -> int:
    """Non-empty lines over JSONL files (missing files count none)."""
    total = 0
    for path in paths:
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                total += sum(1 for line in f if line.strip())
    return total


def _concat(sources: list[Path], target: Path, rng: random.Random | None = None) -> None:
    """Concatenate JSONL files (shuffled when ``rng`` is given), written aside, then renamed."""
    lines: list[str] = []
    for source in sources:
        with source.open(encoding="utf-8") as f:
            lines += [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    if rng is not None:
        rng.shuffle(lines)
    write_atomic(target, lines)
