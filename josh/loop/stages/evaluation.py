"""The evaluation stage: a model on the recipe's held-out tasks, ``results.jsonl`` and ``summary.json`` in its
folder (resumable conversation by conversation)."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from josh.eval.evaluate import evaluate
from josh.eval.metrics import Summary
from josh.loop.stages.base import Guard, Stage, StageContext, complete
from josh.loop.stages.manifest import Input
from josh.run.components import Components
from josh.run.plan import Bound, conversation_bound
from josh.types import Task
from josh.util.layout import RESULTS, SUMMARY


def eval_tasks(ctx: StageContext) -> list[Task]:
    """The held-out tasks every model of the loop is evaluated on."""
    spec = ctx.recipe.eval
    return ctx.env.tasks(spec.split)[: spec.limit]


class EvalStage(Stage):
    """Evaluate ``model`` (a base model name or an adapter folder) as ``label``."""

    def __init__(self, ctx: StageContext, label: str, folder: Path, model: str | Path) -> None:
        super().__init__(ctx, f"eval {label}", folder)
        self.label, self.model = label, model
        self.results, self.summary = folder / RESULTS, folder / SUMMARY

    def settings(self) -> dict[str, Any]:
        spec = self.ctx.recipe.eval
        ids = [t.id for t in eval_tasks(self.ctx)]
        return {"eval": spec.model_dump(mode="json"), "setup": self.ctx.setup_settings(), "tasks": ids}

    def inputs(self) -> dict[str, Input]:
        return {"model": self.model}

    def outputs(self) -> list[Path]:
        return [self.results, self.summary]

    def done(self) -> bool:
        return complete(self.summary)  # written when the run ends; whole once no conversation is pending

    def bound(self) -> Bound:
        spec = self.ctx.recipe.eval
        options = self.ctx.options(spec.split, str(self.model), spec.sampling)
        return conversation_bound(options, spec.max_turns) * (len(eval_tasks(self.ctx)) * spec.trials)

    def run(self) -> None:
        spec = self.ctx.recipe.eval

        def work(built: Components, guard: Guard) -> Coroutine[Any, Any, Summary]:
            return evaluate(
                built.env,
                built.tasks[: spec.limit],
                built.agent,
                built.user,
                self.folder,
                trials=spec.trials,
                concurrency=spec.concurrency,
                max_turns=spec.max_turns,
                cost=built.cost,
                show_progress=self.ctx.progress,
                guard=guard,
            )

        summary = self.run_on(spec.split, str(self.model), spec.sampling, work)
        self.ctx.log(
            f"  {self.label}: average reward {summary.average_reward.mean:.3f}, "
            f"100% success {summary.success_rate.mean:.3f} over {summary.conversations} conversations"
        )
