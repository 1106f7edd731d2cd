"""The rollout stage: JOSH search over one round's train tasks with the round's policy (``trees.jsonl`` and
``stats.json``, written by ``josh.search.rollout``)."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from josh.core.llm import Sampling
from josh.loop.stages.base import Guard, Stage, StageContext, complete
from josh.loop.stages.manifest import Input
from josh.run.components import Components
from josh.run.plan import Bound, search_bound
from josh.search.rollout import RolloutConfig, RunStats, run_rollouts
from josh.types import Task
from josh.util.jsonl import bad_line, iter_numbered, written_lines
from josh.util.layout import ROLLOUT_STATS as STATS_FILE
from josh.util.layout import TREES as TREES_FILE


def excluded_ids(path: Path) -> set[str]:
    """The task ids of ``rollout.exclude``: each JSON line's ``task_id``, or each plain line as an id."""
    if not path.is_file():
        raise ValueError(f"rollout.exclude: {path} is not a file")
    first = next(written_lines(path), None)
    if first is None or not first[1].lstrip().startswith("{"):
        return {line.strip() for _, line in written_lines(path)}
    ids: set[str] = set()
    for number, record in iter_numbered(path):
        task_id = record.get("task_id") if isinstance(record, dict) else None
        if not isinstance(task_id, str):
            bad_line(path, number, "has no task_id", error=ValueError)
            continue
        ids.add(task_id)
    return ids


def rollout_tasks(ctx: StageContext, round_: int) -> list[Task]:
    """Round ``round_``'s train tasks; ``ValueError`` when the split has none left for it."""
    spec = ctx.recipe.rollout
    tasks = ctx.env.tasks(spec.split)
    if spec.exclude is not None:
        left_out = excluded_ids(spec.exclude)
        tasks = [t for t in tasks if t.id not in left_out]
    tasks = tasks[spec.skip :]
    if spec.tasks is None:
        return tasks
    start = (round_ - 1) * spec.tasks if spec.new_tasks_each_round else 0
    chosen = tasks[start : start + spec.tasks]
    if not chosen:
        raise ValueError(
            f"round {round_} has no rollout tasks: {len(tasks)} {spec.split} tasks after "
            f"{'exclude and ' if spec.exclude is not None else ''}skip={spec.skip}, "
            f"{spec.tasks} per round"
        )
    return chosen


def seeded(ctx: StageContext, sampling: Sampling | None) -> Sampling | None:
    """The rollout sampling, seeded by the loop's seed when it has one and the recipe set none."""
    seed = ctx.recipe.seed
    if seed is None or (sampling is not None and sampling.seed is not None):
        return sampling
    return (sampling or Sampling()).model_copy(update={"seed": seed})


class RolloutStage(Stage):
    """Round ``round_``'s search with ``policy`` (the base model name or the adapter of the previous round)."""

    def __init__(self, ctx: StageContext, round_: int, policy: str | Path) -> None:
        super().__init__(ctx, f"round {round_} rollouts", ctx.run_dir / f"round-{round_}" / "rollouts")
        self.policy = policy
        self.trees, self.stats = self.folder / TREES_FILE, self.folder / STATS_FILE
        self.tasks = rollout_tasks(ctx, round_)
        self.spec = ctx.recipe.rollout.model_copy(update={"sampling": seeded(ctx, ctx.recipe.rollout.sampling)})

    def settings(self) -> dict[str, Any]:
        return {
            "rollout": self.spec.model_dump(mode="json"),
            "setup": self.ctx.setup_settings(),
            "tasks": [t.id for t in self.tasks],
        }

    def earlier_settings(self) -> list[dict[str, Any]]:
        """Rollout specs gained ``exclude``: a run recorded without it (none excluded) is the same run."""
        current = self.settings()
        if current["rollout"]["exclude"] is not None:
            return []
        rollout = {k: v for k, v in current["rollout"].items() if k != "exclude"}
        return [{**current, "rollout": rollout}]

    def inputs(self) -> dict[str, Input]:
        inputs: dict[str, Input] = {"policy": self.policy}
        if self.spec.exclude is not None:
            inputs["exclude"] = self.spec.exclude
        return inputs

    def outputs(self) -> list[Path]:
        return [self.trees, self.stats]

    def bound(self) -> Bound:
        options = self.ctx.options(self.spec.split, str(self.policy), self.spec.sampling)
        return search_bound(options, self.spec.search.expanded_turns) * len(self.tasks)

    def done(self) -> bool:
        return complete(self.stats)  # written when the search ends, also after a crash; whole once none is pending

    def run(self) -> None:
        spec = self.spec
        config = RolloutConfig(search=spec.search, concurrency=spec.concurrency)

        def work(built: Components, guard: Guard) -> Coroutine[Any, Any, RunStats]:
            return run_rollouts(
                self.tasks,
                built.env,
                built.agent,
                built.user,
                self.folder,
                config,
                progress=self.ctx.progress,
                guard=guard,
            )

        stats = self.run_on(spec.split, str(self.policy), spec.sampling, work)
        self.ctx.log(
            f"  {stats.tasks} trees, {stats.success} reached 100%, mean reward {stats.mean_reward:.3f}, "
            f"{stats.llm_calls} LLM calls, {stats.session_wall_s:.0f} s"
        )
