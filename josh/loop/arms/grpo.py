"""GRPO: online GRPO on the round's rollout tasks, in the same environment with the same agent and user simulator (the
loop's ``setup``), from the start policy (the warm start, or the base model) in round 1 and from its own previous
adapter afterwards: an independent line of training that spends its own LLM calls, which the report counts beside
the searches'. ``grpo_budget: search`` caps each round's GRPO at the LLM calls of that round's search
(``grpo.max_llm_calls``), so the arms are compared at the same cost."""

from __future__ import annotations

from typing import ClassVar

from josh.loop.arms.base import ArmBase, LoopServices, Model, Round
from josh.loop.stages import RolloutStage, rollout_tasks
from josh.run.spec import AgentSpec, EnvSpec, UserSpec
from josh.search.rollout import RunStats


def search_calls(rollouts: RolloutStage) -> int | None:
    """The LLM calls of a round's search (``None`` in a dry run, before it ran), at least 1 as a budget."""
    if not rollouts.stats.is_file():
        return None
    return max(1, RunStats.model_validate_json(rollouts.stats.read_text(encoding="utf-8")).llm_calls)


class GRPOArm(ArmBase):
    key: ClassVar[str] = "grpo"
    title: ClassVar[str] = "GRPO"

    def run(self, loop: LoopServices, round_: Round) -> Model | None:
        recipe, r, folder = loop.recipe, round_.number, round_.folder
        own = self.train_recipe(recipe)
        shared = set(EnvSpec.model_fields) | set(AgentSpec.model_fields) | set(UserSpec.model_fields)
        tasks = [t.id for t in rollout_tasks(loop.ctx, r)]
        update = {**recipe.setup.model_dump(include=shared), "split": recipe.rollout.split, "task_ids": tasks}
        if recipe.grpo_budget == "search":
            update["max_llm_calls"] = search_calls(round_.rollouts)
        arm = own.model_copy(update={"grpo": own.grpo.model_copy(update=update)})
        loop.result.rounds[-1].own_rollouts[self.title] = folder / "train-grpo"
        train = loop.train_stage(f"round {r} train-grpo", folder / "train-grpo", arm, [], "grpo", start=loop.grpo_start)
        model = loop.evaluate_arm(r, self.title, train, folder / "eval-grpo", round_.policy_label)
        if model is not None:
            loop.grpo_start = model[0]
            for key, role in (("sft", "GRPO vs JOSH"), ("tree", "GRPO vs tree")):
                other = round_.models.get(key)
                if other is not None:
                    loop.result.compare(model[1], other[1], role)
        return model
