"""The records a JOSH search produces: one node per agent turn, one tree (a ``trees.jsonl`` line) per task.

A node holds only its own turn: the agent's messages of that turn and the user's reply to it (with the calls the
user made on its own device before replying, ``user_calls``: the user's side, never the agent's history). A
conversation is rebuilt by walking parent ids back to the root (``path_messages``), so memory grows with the turn,
never with the conversation. The root node has no agent turn; its ``user`` is the user's opening utterance.

Flags (a node can carry several):

* ``ideal``: on the surviving path from the root to the last rewarded turn (the path SFT trains on);
* ``partial``: reached a reward in a step where another leaf was chosen as the new root (or leads to such a leaf);
  neither ideal nor a negative;
* ``pruned``: discarded when another leaf earned a reward (its sibling turns off the ideal path are KTO negatives);
* ``dead``: the agent or the user simulator failed on this turn (``exception`` says why);
* ``ended``: the conversation ended here (the user said done, the environment terminated, or a prompt outgrew its
  model's context: ``ending`` says which, ``exception`` the line).

``ending``: set only where a prompt outgrew its model's context: ``context_length`` (the agent's: on the leaf it
could not answer, or on the turn whose tool results outgrew it), ``user_context_length`` (the user simulator's),
``judge_context_length`` (the environment judge's, scoring a finished branch). Such a branch is a result, never a
failure: labelled and scored like any other.

``reward``: on a task without goals, the final reward of the branch that finished at this node (``None`` elsewhere).

Nodes grown after the last reward carry none of ideal/partial/pruned: they are recorded, but never labelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from josh.core.llm import Spent
from josh.run.diagnostics import CallVerdict
from josh.types import ErrorCategory, Goal, Message, system, user
from josh.util.layout import TREES


class Node(BaseModel):
    """One agent turn and the user's reply to it."""

    id: int
    parent: int | None = None
    depth: int = 0
    messages: list[Message] = Field(default_factory=list)
    reply: str | None = None
    user: str | None = None
    user_calls: list[Message] = Field(default_factory=list)
    user_done: bool = False
    goals: list[int] = Field(default_factory=list)
    reward: float | None = None
    ideal: bool = False
    partial: bool = False
    pruned: bool = False
    dead: bool = False
    ended: bool = False
    ending: str | None = None
    errors: list[ErrorCategory] = Field(default_factory=list)
    calls: list[CallVerdict] = Field(default_factory=list)
    exception: str | None = None
    llm_calls: int = 0
    user_llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class TreeStats(Spent):
    """Accounting of one task's search (agent and user LLM calls together)."""

    wall_s: float = 0.0
    nodes: int = 0
    errors: int = 0
    overflows: int = Field(0, description="nodes whose branch ended on a prompt longer than its model's context")


class Tree(BaseModel):
    """One task's search: the ``trees.jsonl`` record.

    ``system`` is the system prompt the agent put in front of every request, ``preamble`` the messages it put
    between that prompt and the conversation (worked examples as chat turns) and ``tools`` the tool schemas it was
    offered; extraction puts all three into the training rows. ``protocol`` names the agent's output protocol
    (``None`` for a scripted agent, and in runs older than the field); the viewer reads the turns with it. ``error`` is set only when the task could not be searched
    at all (e.g. it has no goals or the environment rejected it). ``failed`` is set when an LLM request of the search
    failed after its retries (``josh.llm.health``): the tree is no result, never harvested, searched again on rerun.
    """

    task_id: str
    reward: float = 0.0
    max_reward: float = 0.0
    goals: list[Goal] = Field(default_factory=list)
    n_goals: int = 0
    success: bool = False
    system: str | None = None
    preamble: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    protocol: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    nodes: list[Node] = Field(default_factory=list)
    stats: TreeStats = Field(default_factory=TreeStats)
    error: str | None = None
    failed: str | None = None

    def node(self, node_id: int) -> Node:
        node = self.nodes[node_id]
        if node.id != node_id:
            raise ValueError(f"tree {self.task_id}: node ids are not their positions")
        return node

    def children(self) -> dict[int, list[Node]]:
        """Children of every node, in creation order."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            if n.parent is not None:
                out.setdefault(n.parent, []).append(n)
        return out

    def lineage(self, node_id: int) -> list[Node]:
        """The nodes from the root down to ``node_id``, both included."""
        chain: list[Node] = []
        current: int | None = node_id
        while current is not None:
            n = self.node(current)
            chain.append(n)
            current = n.parent
        return chain[::-1]

    def ideal_path(self) -> list[Node]:
        """Root to the deepest ideal node (the last rewarded turn); just the root if nothing was rewarded."""
        ideal = [n for n in self.nodes if n.ideal]
        return self.lineage(max(ideal, key=lambda n: n.depth).id) if ideal else self.lineage(0)


def turn_messages(node: Node, *, user_reply: bool = True) -> list[Message]:
    """The messages one node adds to the conversation: its agent turn, then the user's reply."""
    out = list(node.messages)
    if user_reply and node.user is not None and not node.user_done:
        out.append(user(node.user))
    return out


def path_messages(tree: Tree, node_id: int, *, user_reply: bool = True, with_system: bool = True) -> list[Message]:
    """The conversation from the start through ``node_id``'s agent turn (and its user reply if ``user_reply``).

    A user reply that ended the conversation is left out: the agent never saw it."""
    head = ([system(tree.system)] if tree.system else []) + list(tree.preamble) if with_system else []
    return head + chain_messages(tree.lineage(node_id), user_reply=user_reply)


def chain_messages(chain: list[Node], *, user_reply: bool = True) -> list[Message]:
    """The messages along a root-to-node chain (the last node's user reply only if ``user_reply``)."""
    out: list[Message] = []
    for i, n in enumerate(chain):
        out.extend(turn_messages(n, user_reply=user_reply or i < len(chain) - 1))
    return out


def transcript_of(tree_nodes: list[Node]) -> list[Message]:
    """What the user simulator sees along a chain of nodes: the agent's spoken replies, the user's own calls with
    their results, and its utterances."""
    out: list[Message] = []
    for n in tree_nodes:
        if n.reply is not None:
            out.append(Message(role="assistant", content=n.reply))
        out.extend(n.user_calls)
        if n.user is not None:
            out.append(user(n.user))
    return out


class NoTreesError(FileNotFoundError, ValueError):
    """A run folder (or path) with no search trees: a missing file, and a bad argument."""


def trees_file(run: str | Path) -> Path:
    """The ``trees.jsonl`` of a rollout folder (or the file itself); ``NoTreesError`` when there is none."""
    path = Path(run)
    if path.is_dir():
        path = path / TREES
    if not path.is_file():
        raise NoTreesError(f"no {TREES} at {path}: pass a rollout run folder or its {TREES} (run `josh rollout` first)")
    return path
