"""The self-training loop (``josh loop``): baseline evaluation, an optional scripted warm start, then ``rounds`` of
JOSH rollouts → extraction → SFT and/or KTO → evaluation on the same held-out tasks, and a report.

Layout under ``<output_dir>/<name>/``::

    loop.yaml                     the resolved recipe
    round-0/baseline/             evaluation of the base model
    round-0/warmstart/data/       scripted demonstrations in the agent's format (sft.jsonl)
    round-0/warmstart/train/      SFT adapter trained on them
    round-0/warmstart/eval/       its evaluation
    round-R/rollouts/             JOSH search trees of round R (the previous round's policy acts)
    round-R/extract/              sft.jsonl, kto.jsonl, dpo.jsonl
    round-R/train-sft/ train-kto/ adapters
    round-R/eval-sft/ eval-kto/   their evaluations
    report.md, plots/

Every stage writes a manifest (``josh.manifest``) and is skipped when it already finished for the same inputs, so
a killed loop restarted with the same command resumes where it stopped. By default the SFT arm is retrained from the
base model each round on the warm-start rows plus every round's ideal paths so far (``accumulate``); with
``sft_from: policy`` it instead continues the adapter that ran the round's rollouts, on that round's ideal paths only.
The KTO arm trains from the base model on its round's good/bad turns, as in the paper. ``policy`` picks the arm
whose adapter runs the next round's rollouts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from josh.components import ComponentOptions, Components, build_components, build_env
from josh.envs.base import Env
from josh.llm.base import LLMError
from josh.manifest import run_stage
from josh.recipes import LoopRecipe, TrainRecipe
from josh.types import Task
from josh.warmstart import WarmStartConfig

Trainer = Callable[[TrainRecipe, bool], Path]
Builder = Callable[[ComponentOptions, dict[str, Any]], Components]


def train_with_trl(recipe: TrainRecipe, resume: bool) -> Path:
    """The real trainer (TRL + PEFT); tests inject a cheaper one."""
    from josh.training.runner import train

    return train(recipe, resume=resume)


def build_with_options(options: ComponentOptions, agent_options: dict[str, Any]) -> Components:
    """``build_components``, with the prompted agent rebuilt on the same backend when it has options."""
    from josh.agents import make_agent
    from josh.components import LLM_FREE_AGENTS

    built = build_components(options)
    if agent_options and options.agent not in LLM_FREE_AGENTS:
        built.agent = make_agent(options.agent, built.env, built.agent.llm, **agent_options)
    return built


class _NoLLM:
    """Stands in for a backend where an agent is only asked for its prompt and protocol, never to generate."""

    async def chat(self, *args: Any, **kwargs: Any) -> Any:
        raise LLMError("this agent was built without a backend")


@dataclass
class Evaluated:
    """One evaluated model of the loop, for the report."""

    label: str
    round: int
    folder: Path


@dataclass
class LoopResult:
    """What a loop produced: where, which models were evaluated, which stages ran this time."""

    run_dir: Path
    evaluated: list[Evaluated] = field(default_factory=list)
    rollouts: list[tuple[int, Path]] = field(default_factory=list)
    trained: list[tuple[str, Path]] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


class Loop:
    """Runs a ``LoopRecipe`` stage by stage; see the module docstring."""

    def __init__(
        self,
        recipe: LoopRecipe,
        *,
        trainer: Trainer = train_with_trl,
        builder: Builder = build_with_options,
        console: Console | None = None,
        progress: bool = True,
    ) -> None:
        self.recipe = recipe
        self.trainer = trainer
        self.builder = builder
        self.console = console or Console()
        self.progress = progress
        self.run_dir = recipe.run_dir
        self.result = LoopResult(run_dir=self.run_dir)
        self._env: Env | None = None

    @property
    def env(self) -> Env:
        if self._env is None:
            self._env = build_env(self.recipe.setup.env, self.recipe.setup.data)
        return self._env

    def log(self, text: str) -> None:
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
        ran = run_stage(name, folder, config, inputs, work, finished=finished, log=self.log)
        (self.result.ran if ran else self.result.skipped).append(name)

    # components -------------------------------------------------------------------------------------------

    def _options(self, split: str, model: str, sampling: Any) -> ComponentOptions:
        s = self.recipe.setup
        return ComponentOptions(
            env=s.env, data=s.data, split=split, agent=s.agent, backend=s.backend, model=model, user=s.user,
            user_backend=s.user_backend, user_model=s.user_model, base_url=s.base_url,
            user_base_url=s.user_base_url, llm_options=s.llm_options, agent_sampling=sampling,
        )  # fmt: skip

    def _build(self, split: str, model: str, sampling: Any) -> Components:
        """Env, tasks, agent (with the recipe's agent options), user and LLMs for one stage."""
        options = dict(self.recipe.setup.agent_options)
        if sampling is not None:
            options["sampling"] = sampling
        return self.builder(self._options(split, model, sampling), options)

    def prompt_agent(self) -> Any:
        """The agent as it is prompted, without a backend (for its system prompt, protocol and tools)."""
        from josh.agents import make_agent

        return make_agent(self.recipe.setup.agent, self.env, _NoLLM(), **self.recipe.setup.agent_options)

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

    # stages -----------------------------------------------------------------------------------------------

    def evaluate(self, label: str, round_: int, folder: Path, model: str | Path) -> None:
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
                    )
                )
            finally:
                self._close(built)
            self.log(
                f"  {label}: average reward {summary.average_reward.mean:.3f}, "
                f"100% success {summary.success_rate.mean:.3f} over {summary.conversations} conversations"
            )

        config = {"eval": spec.model_dump(mode="json"), "setup": self._setup_config(), "tasks": self._ids()}
        self._stage(f"eval {label}", folder, config, {"model": model}, work, lambda: (folder / SUMMARY).is_file())
        self.result.evaluated.append(Evaluated(label=label, round=round_, folder=folder))

    def _ids(self) -> list[str]:
        return [t.id for t in self.eval_tasks()]

    def _setup_config(self) -> dict[str, Any]:
        config = self.recipe.setup.model_dump(mode="json", exclude={"model"})
        if not config["llm_options"]:  # absent before backend settings existed: older runs keep resuming
            del config["llm_options"]
        return config

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
        self, name: str, folder: Path, arm: TrainRecipe, sources: list[Path], method: str, start: Path | None = None
    ) -> Path:
        """Train one arm on the concatenated ``sources`` into ``folder``: a fresh adapter on the base model, or the
        adapter ``start`` trained further."""
        from josh.training.runner import last_checkpoint

        data = folder / "data.jsonl"
        model = arm.model.model_copy(update={"adapter": str(start) if start is not None else None})

        def work() -> None:
            _concat(sources, data)
            update = {"method": method, "data": data, "output_dir": folder.parent, "run_name": folder.name}
            recipe = arm.model_copy(update={**update, "model": model})
            if (folder / "metrics.json").is_file():
                return
            self.trainer(recipe, last_checkpoint(folder) is not None)

        skip = {"data": True, "output_dir": True, "run_name": True, "model": {"adapter"}}  # the start is an input
        config = {"train": arm.model_dump(mode="json", exclude=skip), "method": method}
        inputs: dict[str, Any] = {f"data{i}": p for i, p in enumerate(sources)}
        if start is not None:
            inputs["start"] = start
        self._stage(name, folder, config, inputs, work, lambda: (folder / "metrics.json").is_file())
        self.result.trained.append((name, folder))
        return folder

    def rollouts(self, round_: int, policy: str | Path) -> Path:
        from josh.rollout import RolloutConfig, run_rollouts

        spec = self.recipe.rollout
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
        self.result.rollouts.append((round_, folder))
        return folder

    def extract(self, round_: int, rollouts: Path) -> Path:
        from josh.extract import extract

        folder = self.run_dir / f"round-{round_}" / "extract"

        def work() -> None:
            stats = extract(rollouts, folder, self.recipe.extract)
            self.log(
                f"  {stats.accepted}/{stats.trees} trees used: {stats.sft} SFT, {stats.kto_desirable} good + "
                f"{stats.kto_undesirable} bad KTO rows"
            )

        config = {"extract": self.recipe.extract.model_dump(mode="json"), "agent": self.recipe.setup.agent}
        inputs = {"trees": rollouts / "trees.jsonl"}
        self._stage(f"round {round_} extract", folder, config, inputs, work, (folder / "sft.jsonl").is_file)
        return folder

    # the loop ---------------------------------------------------------------------------------------------

    def run(self) -> LoopResult:
        """Run (or resume) every stage, then write the report."""
        recipe = self.recipe
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "loop.yaml").write_text(recipe.to_yaml(), encoding="utf-8")
        base = recipe.setup.model
        round0 = self.run_dir / "round-0"
        if recipe.baseline:
            self.evaluate("base", 0, round0 / "baseline", base)
        sft_sources: list[Path] = []
        policy: str | Path = base
        if recipe.warm_start is not None and recipe.warm_start.enabled and recipe.sft is not None:
            sft_sources.append(self.warm_start(recipe.warm_start))
            policy = self.train("warm-start train", round0 / "warmstart" / "train", recipe.sft, sft_sources, "sft")
            self.evaluate("warm start", 0, round0 / "warmstart" / "eval", policy)
        for r in range(1, recipe.rounds + 1):
            policy = self._round(r, policy, sft_sources)
        self.write_report()
        return self.result

    def _round(self, r: int, policy: str | Path, sft_sources: list[Path]) -> str | Path:
        recipe = self.recipe
        folder = self.run_dir / f"round-{r}"
        extracted = self.extract(r, self.rollouts(r, policy))
        adapters: dict[str, Path] = {}
        if recipe.sft is not None:
            sources = [*sft_sources, extracted / "sft.jsonl"] if recipe.accumulate else [extracted / "sft.jsonl"]
            if recipe.accumulate:
                sft_sources.append(extracted / "sft.jsonl")
            start = policy if recipe.sft_from == "policy" and isinstance(policy, Path) else None
            if _rows(sources) == 0:
                self.log(f"  round {r}: no SFT rows (no tree reached min_reward); the SFT arm keeps its policy")
            else:
                adapters["sft"] = self.train(
                    f"round {r} train-sft", folder / "train-sft", recipe.sft, sources, "sft", start
                )
        if recipe.kto is not None:
            if _rows([extracted / "kto.jsonl"]) == 0:
                self.log(f"  round {r}: no KTO rows; the KTO arm is not trained this round")
            else:
                adapters["kto"] = self.train(
                    f"round {r} train-kto", folder / "train-kto", recipe.kto, [extracted / "kto.jsonl"], "kto"
                )
        for arm, adapter in adapters.items():
            self.evaluate(f"round {r} JOSH-{arm.upper()}", r, folder / f"eval-{arm}", adapter)
        return adapters.get(recipe.policy_arm, policy)

    def write_report(self) -> Path:
        from josh.report import write_loop_report

        path = write_loop_report(self.result, title=f"josh loop: {self.recipe.name}")
        self.log(f"report -> {path}")
        return path


def _rows(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                total += sum(1 for line in f if line.strip())
    return total


def _concat(sources: list[Path], target: Path) -> None:
    """Concatenate JSONL files (written aside, then renamed)."""
    tmp = target.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for source in sources:
            with source.open(encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        out.write(line if line.endswith("\n") else line + "\n")
    os.replace(tmp, target)


def run_loop(recipe: LoopRecipe, *, progress: bool = True) -> LoopResult:
    """``josh loop``: run or resume every stage of ``recipe`` and write ``report.md``."""
    return Loop(recipe, progress=progress).run()
