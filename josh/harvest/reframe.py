"""Trees framed for the agent that will be trained: its system prompt, preamble and tools in front of every row.

A tree records the frame of the agent that searched it (``Tree.system``, ``preamble``, ``tools``, ``protocol``). A
scripted agent (the ToolWOZ oracle, replay) has no prompt, so its trees record none, and rows taken from them as
they are would train a model without the system prompt it is evaluated with. ``Reframe`` puts the frame of a named
prompted agent (``josh.agents.agent_prompt``: the protocol's prompt around the environment's own
``system_prompt(task)``, its worked examples, the tools it passes to the backend) on each tree, and writes a scripted
agent's turns (canonical tool calls and results) in that agent's protocol, as the loop's warm start does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from josh.agents import agent_prompt
from josh.agents.prompted import AgentPrompt
from josh.agents.protocol import RenderError
from josh.core.env import Env
from josh.envs import build_env
from josh.harvest.extract_stats import ExtractStats
from josh.search.tree import Tree, trees_file
from josh.types import Task
from josh.util.jsonl import iter_numbered
from josh.util.layout import ROLLOUT_STATS


class Reframe:
    """``reframe(tree)``: ``tree`` with the frame ``prompt`` gives its task (looked up in ``env``'s ``splits``, the
    first one first, each loaded when a task is not found in the ones before)."""

    def __init__(self, prompt: AgentPrompt, env: Env, splits: Iterable[str]) -> None:
        self.prompt, self.env = prompt, env
        self._splits = list(dict.fromkeys(splits))
        self._tasks: dict[str, Task] = {}

    @property
    def protocol(self) -> str:
        return self.prompt.protocol.name

    def describe(self) -> str:
        """What the rows' frame is, for the dataset card."""
        return f"the {self.protocol} agent: its system prompt, preamble and tools come first (josh extract --agent)"

    def task(self, task_id: str) -> Task:
        """The task ``task_id``; ``ValueError`` when none of the splits has it."""
        while task_id not in self._tasks and self._splits:
            self._tasks.update((t.id, t) for t in self.env.tasks(self._splits.pop(0)))
        if task_id not in self._tasks:
            raise ValueError(f"task {task_id!r} of the trees is in no split of {self.env.name}: is this its data?")
        return self._tasks[task_id]

    def __call__(self, tree: Tree) -> Tree:
        """``tree`` with this agent's frame; a scripted agent's turns rewritten in its protocol (``RenderError``
        when a turn would not read back the same). Trees another prompted agent searched are refused: their turns
        are written in that agent's protocol."""
        if tree.protocol is not None and tree.protocol != self.protocol:
            raise ValueError(
                f"tree {tree.task_id} was searched by the {tree.protocol} agent, whose turns are written in its own "
                f"protocol: extract it with --agent {tree.protocol} (or without --agent), not {self.protocol}"
            )
        if tree.protocol is None and tree.system:
            raise ValueError(
                f"tree {tree.task_id} records a system prompt but no protocol (a rollout older than the field): its "
                "turns are written in a protocol josh cannot tell, so extract it without --agent"
            )
        frame = self.prompt.frame(self.task(tree.task_id))
        nodes = tree.nodes
        if tree.protocol is None:
            nodes = [n.model_copy(update={"messages": self.prompt.render(n.messages)}) for n in tree.nodes]
        update = {"system": frame.system, "preamble": frame.preamble, "tools": frame.tools, "protocol": frame.protocol}
        return tree.model_copy(update={**update, "nodes": nodes})


def unframed(trees: str | Path) -> bool:
    """True when the first searched tree of ``trees`` (a file or a run folder) records no system prompt and no
    protocol: a scripted agent searched it, and its rows as recorded would have no system prompt."""
    for _, value in iter_numbered(trees_file(trees), skip_bad=True):
        if isinstance(value, dict) and value.get("nodes"):
            return not value.get("system") and value.get("protocol") is None
    return False


def reframed(trees: list[Tree], reframe: Callable[[Tree], Tree], stats: ExtractStats) -> list[Tree]:
    """Each tree with the trained agent's frame; a tree whose turns its protocol cannot write is left out and
    counted as ``unrenderable``."""
    out = []
    for tree in trees:
        try:
            out.append(reframe(tree))
        except RenderError:
            stats.unrenderable += 1
    return out


RECORDED = "recorded"
"""``josh extract --agent recorded``: the trees' own frames, kept even where a scripted agent recorded none."""


def run_reframe(trees: str | Path, agent: str | None, options: dict[str, Any]) -> Reframe | None:
    """What ``josh extract --agent`` puts on the trees of a rollout (a file or a run folder): the frame of the
    prompted ``agent`` with ``options`` over the environment, data and split the rollout's ``stats.json`` names;
    ``None`` for the recorded frames. Without ``agent``, a scripted agent's trees are refused (``ValueError``)."""
    path = trees_file(trees)
    if agent is None or agent == RECORDED:
        if agent is None and unframed(path):
            raise ValueError(
                f"{path}: a scripted agent searched these trees and they record no system prompt, so their rows "
                "would train without the prompt the agent is evaluated with: name the agent to train, e.g. "
                f"--agent function_calling (react, act), or --agent {RECORDED} to keep them without one"
            )
        if options:
            raise ValueError("--agent-option needs --agent naming a prompted agent")
        return None
    try:
        run = json.loads((path.parent / ROLLOUT_STATS).read_text(encoding="utf-8")).get("run") or {}
    except (OSError, ValueError, AttributeError):
        run = {}
    if not run.get("env"):
        raise ValueError(f"--agent needs the rollout's {ROLLOUT_STATS} beside {path} (it names the environment)")
    env = build_env(run["env"], run.get("data") or "mini", run.get("env_options") or {})
    splits = [run["split"]] if run.get("split") else []
    return Reframe(agent_prompt(agent, env, **options), env, [*splits, *env.splits])
