"""The loop's tree and GRPO arms, beside JOSH-SFT and JOSH-KTO, evaluated on the same held-out tasks.

* **JOSH-tree** (``tree:`` in the loop recipe): from the round's trees, every sibling turn with its tree advantage
  (``round-R/extract-tree/tree.jsonl``), trained with the advantage-weighted loss as a continuation of the adapter
  that searched the round (a fresh adapter when the base model searched). It costs no LLM call beyond the search.
* **GRPO** (``grpo:``): online GRPO on the round's rollout tasks, in the same environment with the same agent and
  user simulator (the loop's ``setup``), from the start policy (the warm start, or the base model) in round 1 and
  from its own previous adapter afterwards: an independent line of training that spends its own LLM calls, which
  the report counts beside the searches'.

Layout: ``round-R/extract-tree/``, ``round-R/train-tree/``, ``round-R/eval-tree/``, ``round-R/train-grpo/``,
``round-R/eval-grpo/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.runspec import AgentSpec, EnvSpec, UserSpec
from josh.stages import count_rows

Model = tuple[Path, str]


class OnlineArms:
    """Mixed into ``josh.loop.Loop``; uses its stages (``train``, ``_stage``, ``_evaluate_arm``, ...)."""

    recipe: Any
    run_dir: Path
    grpo_start: Path | None = None

    def extract_tree(self, round_: int, rollouts: Path) -> Path:
        """The round's tree-advantage rows (``tree.jsonl``) and their statistics."""
        from josh.extract import extract

        folder = self.run_dir / f"round-{round_}" / "extract-tree"
        advantages = self.recipe.advantages

        def work() -> None:
            stats = extract(rollouts, folder, formats=("tree",), advantages=advantages)
            self.log(
                f"  {stats.tree_rows} sibling turns from {stats.tree_groups - stats.tree_zero_groups} groups "
                f"({stats.tree_zero_groups} of {stats.tree_groups} groups had equal rewards and were skipped)"
            )

        config = {"advantages": advantages.model_dump(mode="json"), "agent": self.recipe.setup.agent}
        inputs = {"trees": rollouts / "trees.jsonl"}
        done = (folder / "tree.jsonl").is_file
        self._stage(f"round {round_} extract-tree", folder, config, inputs, work, done)
        return folder

    def tree_arm(self, r: int, folder: Path, rollouts: Path, policy: Any, policy_label: str) -> Model | None:
        """JOSH-tree: the round's advantages, continuing the adapter that searched."""
        recipe = self.recipe
        data = self.extract_tree(r, rollouts)
        self.result.rounds[-1].tree = data
        if count_rows([data / "tree.jsonl"]) == 0:
            self.note("JOSH-tree", r, "no sibling turns with unequal subtree rewards: nothing to train")
            return None
        start = policy if isinstance(policy, Path) else None
        train = folder / "train-tree"
        adapter = self.train(f"round {r} train-tree", train, recipe.tree, [data / "tree.jsonl"], "tree", start=start)
        model = self._evaluate_arm(r, "JOSH-tree", adapter, train, folder / "eval-tree", policy_label)
        if model is not None:
            self.compare(model[1], f"round {r} JOSH-SFT", "tree vs SFT")
        return model

    def grpo_arm(self, r: int, folder: Path, policy_label: str) -> Model | None:
        """GRPO: online rollouts on the round's tasks, continuing its own line from the start policy."""
        recipe = self.recipe
        setup = recipe.setup
        tasks = [t.id for t in self.rollout_tasks(r)]
        shared = set(EnvSpec.model_fields) | set(AgentSpec.model_fields) | set(UserSpec.model_fields)
        update = {**setup.model_dump(include=shared), "split": recipe.rollout.split, "task_ids": tasks}
        spec = recipe.grpo.grpo.model_copy(update=update)
        arm = recipe.grpo.model_copy(update={"grpo": spec})
        train = folder / "train-grpo"
        self.result.rounds[-1].grpo = train
        adapter = self.train(f"round {r} train-grpo", train, arm, [], "grpo", start=self.grpo_start)
        model = self._evaluate_arm(r, "GRPO", adapter, train, folder / "eval-grpo", policy_label)
        if model is not None:
            self.grpo_start = model[0]
            self.compare(model[1], f"round {r} JOSH-SFT", "GRPO vs JOSH")
            self.compare(model[1], f"round {r} JOSH-tree", "GRPO vs tree")
        return model
