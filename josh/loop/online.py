"""The loop's tree and GRPO arms, beside JOSH-SFT and JOSH-KTO, evaluated on the same held-out tasks.

* **JOSH-tree** (``tree:`` in the loop recipe): from the round's trees, every sibling turn with its tree advantage
  (``round-R/extract-tree/tree.jsonl``), trained with the advantage-weighted loss as a continuation of the adapter
  that searched the round (a fresh adapter when the base model searched). It costs no LLM call beyond the search.
* **GRPO** (``grpo:``): online GRPO on the round's rollout tasks, in the same environment with the same agent and
  user simulator (the loop's ``setup``), from the start policy (the warm start, or the base model) in round 1 and
  from its own previous adapter afterwards: an independent line of training that spends its own LLM calls, which
  the report counts beside the searches'. ``grpo_budget: search`` caps each round's GRPO at the LLM calls of that
  round's search (``grpo.max_llm_calls``), so the arms are compared at the same cost.

Layout: ``round-R/extract-tree/``, ``round-R/train-tree/``, ``round-R/eval-tree/``, ``round-R/train-grpo/``,
``round-R/eval-grpo/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.loop.stages import RolloutStage, StageContext, TreeExtractStage, rollout_tasks
from josh.run.spec import AgentSpec, EnvSpec, UserSpec
from josh.search.rollout import RunStats

Model = tuple[Path, str]


class OnlineArms:
    """Mixed into ``josh.loop.runner.Loop``; runs its stages through the loop's ``train_stage``, ``_evaluate_arm`` and
    ``note``."""

    recipe: Any
    ctx: StageContext
    grpo_start: Path | None = None

    def tree_arm(self, r: int, folder: Path, rollouts: RolloutStage, policy: Any, policy_label: str) -> Model | None:
        """JOSH-tree: the round's advantages, continuing the adapter that searched."""
        data = TreeExtractStage(self.ctx, r, rollouts.trees)
        self.ctx.execute(data)
        self.ctx.result.rounds[-1].tree = data.folder
        if data.row_count() == 0:
            self.note("JOSH-tree", r, "no sibling turns with unequal subtree rewards: nothing to train")
            return None
        start = policy if isinstance(policy, Path) else None
        train = self.train_stage(
            f"round {r} train-tree", folder / "train-tree", self.recipe.tree, [data.rows], "tree", start=start
        )
        model = self._evaluate_arm(r, "JOSH-tree", train, folder / "eval-tree", policy_label)
        if model is not None:
            self.ctx.result.compare(model[1], f"round {r} JOSH-SFT", "tree vs SFT")
        return model

    def grpo_arm(self, r: int, folder: Path, rollouts: RolloutStage, policy_label: str) -> Model | None:
        """GRPO: online rollouts on the round's tasks, continuing its own line from the start policy."""
        recipe = self.recipe
        shared = set(EnvSpec.model_fields) | set(AgentSpec.model_fields) | set(UserSpec.model_fields)
        tasks = [t.id for t in rollout_tasks(self.ctx, r)]
        update = {**recipe.setup.model_dump(include=shared), "split": recipe.rollout.split, "task_ids": tasks}
        if recipe.grpo_budget == "search":
            update["max_llm_calls"] = search_calls(rollouts)
        arm = recipe.grpo.model_copy(update={"grpo": recipe.grpo.grpo.model_copy(update=update)})
        self.ctx.result.rounds[-1].grpo = folder / "train-grpo"
        train = self.train_stage(f"round {r} train-grpo", folder / "train-grpo", arm, [], "grpo", start=self.grpo_start)
        model = self._evaluate_arm(r, "GRPO", train, folder / "eval-grpo", policy_label)
        if model is not None:
            self.grpo_start = model[0]
            self.ctx.result.compare(model[1], f"round {r} JOSH-SFT", "GRPO vs JOSH")
            self.ctx.result.compare(model[1], f"round {r} JOSH-tree", "GRPO vs tree")
        return model


def search_calls(rollouts: RolloutStage) -> int | None:
    """The LLM calls of a round's search (``None`` in a dry run, before it ran), at least 1 as a budget."""
    if not rollouts.stats.is_file():
        return None
    return max(1, RunStats.model_validate_json(rollouts.stats.read_text(encoding="utf-8")).llm_calls)
