"""Turn-level advantages from JOSH search trees, without a value model.

Every node of a tree whose agent turn was sampled ``k >= 2`` times from the same history is a *branching point*:
its children are sibling turns on one prompt, and the search already knows what each of them led to. Each sibling
turn gets an advantage: its subtree reward minus the mean subtree reward of its siblings (leave-one-out, as in
RLOO, so a turn is never its own baseline). A group whose turns all have the same subtree reward teaches nothing
(every advantage is zero): it is skipped and counted.

**Path reward** of a node: the share of the task's goals completed on the conversation from the root to that node
(the goals of every node on its lineage, once each). It is what the environment's goal reward would be if the
conversation stopped right after that turn.

**Subtree reward** of a node: the best (``subtree: max``, the default) or mean (``subtree: mean``) path reward over
its *horizon leaves*: the leaves below it, where a reward event closes the horizon. The search grows every live
branch in lockstep and, as soon as one turn earns a reward, makes that turn the new root and prunes every other
branch grown since the previous root. So siblings are only comparable up to that event: the pruned ones were
never allowed to go further. A node that became a new root (``ideal`` with new goals) is therefore a horizon leaf
of every subtree above it; what grows after it belongs to the next segment and is compared there. Two turns that
completed the same goal in the same step thus tie (advantage 0) even though only one was kept, and a turn is
credited for the reward its own branch reached within the horizon all its siblings shared.

``max`` is the default because the search itself is a max operator: it keeps the best branch, and a beam is not a
sample of the policy's continuations, so the mean over a beam's leaves is no better a value estimate and it
penalises a turn for its weaker descendants. ``mean`` is there for comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from josh.harvest.trl_rows import trl_messages
from josh.search.tree import Node, Tree, path_messages

Row = dict[str, Any]
Aggregate = Literal["max", "mean"]


class AdvantageConfig(BaseModel):
    """How a turn's subtree reward is read from the tree."""

    model_config = ConfigDict(extra="forbid")

    subtree: Aggregate = Field("max", description="best (max) or mean path reward over a turn's horizon leaves")


class AdvantageStats(BaseModel):
    """What advantage extraction found (merged into ``extract_stats.json`` as ``tree_*``)."""

    groups: int = 0
    zero_groups: int = 0
    rows: int = 0


class SiblingGroup(BaseModel):
    """The sibling turns sampled at one branching point, with their subtree rewards and advantages."""

    task_id: str
    parent: int
    turns: list[int]
    rewards: list[float]
    advantages: list[float]

    @property
    def key(self) -> str:
        return f"{self.task_id}#{self.parent}"

    @property
    def informative(self) -> bool:
        return any(abs(a) > 1e-12 for a in self.advantages)


def path_rewards(tree: Tree) -> dict[int, float]:
    """Share of the goals completed on the path from the root to every node."""
    if tree.n_goals <= 0:
        return {n.id: 0.0 for n in tree.nodes}
    done: dict[int, frozenset[int]] = {}
    for node in tree.nodes:  # parents come before their children
        inherited = done[node.parent] if node.parent is not None else frozenset()
        done[node.id] = inherited | frozenset(node.goals)
    return {i: len(goals) / tree.n_goals for i, goals in done.items()}


def _closes_horizon(node: Node) -> bool:
    """A turn that became a new root: the search collapsed onto it when it earned a reward."""
    return node.ideal and bool(node.goals)


def subtree_rewards(tree: Tree, how: Aggregate = "max") -> dict[int, float]:
    """Every node's subtree reward: the max or mean path reward over its horizon leaves (computed bottom-up)."""
    paths = path_rewards(tree)
    children = tree.children()
    best: dict[int, float] = {}
    total: dict[int, float] = {}
    leaves: dict[int, int] = {}
    for node in reversed(tree.nodes):  # children come after their parents
        below = children.get(node.id, [])
        if not below or _closes_horizon(node):
            best[node.id] = total[node.id] = paths[node.id]
            leaves[node.id] = 1
            continue
        best[node.id] = max(best[c.id] for c in below)
        total[node.id] = sum(total[c.id] for c in below)
        leaves[node.id] = sum(leaves[c.id] for c in below)
    if how == "max":
        return best
    return {i: total[i] / leaves[i] for i in total}


def leave_one_out(rewards: list[float]) -> list[float]:
    """Each reward minus the mean of the others (needs at least two)."""
    n = len(rewards)
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def sibling_groups(tree: Tree, config: AdvantageConfig | None = None) -> list[SiblingGroup]:
    """Every branching point of a searched tree: two or more sibling turns (children with an agent turn)."""
    config = config or AdvantageConfig()
    if tree.error is not None or not tree.nodes:
        return []
    values = subtree_rewards(tree, config.subtree)
    groups = []
    for parent, kids in tree.children().items():
        turns = [k for k in kids if k.messages]
        if len(turns) < 2:
            continue
        rewards = [values[k.id] for k in turns]
        groups.append(
            SiblingGroup(
                task_id=tree.task_id,
                parent=parent,
                turns=[k.id for k in turns],
                rewards=rewards,
                advantages=[round(a, 9) for a in leave_one_out(rewards)],
            )
        )
    return groups


def advantage_rows(
    trees: Iterable[Tree], config: AdvantageConfig | None = None, stats: AdvantageStats | None = None
) -> list[Row]:
    """``tree.jsonl`` rows: the shared prompt (system prompt first), one sibling turn as the completion, its
    advantage, its subtree reward, its group id and the tools offered. All-zero groups are skipped and counted."""
    stats = stats if stats is not None else AdvantageStats()
    rows: list[Row] = []
    for tree in trees:
        for group in sibling_groups(tree, config):
            stats.groups += 1
            if not group.informative:
                stats.zero_groups += 1
                continue
            prompt = trl_messages(path_messages(tree, group.parent))
            for node_id, reward, advantage in zip(group.turns, group.rewards, group.advantages, strict=True):
                rows.append(
                    {
                        "prompt": prompt,
                        "completion": trl_messages(tree.node(node_id).messages),
                        "advantage": advantage,
                        "reward": reward,
                        "group": group.key,
                        "tools": list(tree.tools),
                    }
                )
    stats.rows = len(rows)
    return rows
