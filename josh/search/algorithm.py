"""JOSH turn-level beam search (paper Algorithm 1) over agent turns, for any branching factor.

One step of the search:

1. every live leaf is expanded by ``branching`` sampled agent turns while ``live × branching ≤ max_beam``, else by
   one; each leaf makes ONE ``agent.turn(history, state, n=k)`` call and all leaves' calls run concurrently, so the
   backend batches them and the k siblings share one prompt;
2. a child whose turn completed goals not yet credited on the root path is rewarded. If any child is rewarded, the
   one with the most new goals becomes the new root (ties: a child whose conversation goes on, then the first in
   leaf order). All its goals are credited at once (reward += 1/|goals| each); every other rewarded child is
   ``partial``, every other node grown since the previous root is ``pruned``, and the beam restarts from the root;
3. unless every goal is met, the user simulator answers every live leaf concurrently; a leaf whose user is done, or
   whose environment state terminated, has ended. A user turn may take several steps (``josh.run.user_turn``): the
   calls the user makes on its own device (τ² telecom) run on the leaf's state and are kept on its node
   (``Node.user_calls``), on the user's side, never in the agent's history.

The search stops when every goal is met, no live leaf remains, or ``max_depth`` agent turns were taken.

A task without goals, in an environment whose ``outcome_reward`` is set (elsewhere it is recorded unsearched), is
searched the same way without step 2: every branch runs to its end (the user done, the state terminated, or
``max_depth``), the environment's final reward scores each finished branch (``Node.reward``), and the best one
(ties: the first) is the ideal path when its reward is above 0; the other finished branches with a reward are
``partial`` and every other node is ``pruned``.

Failures never escape (``josh.run.step``): an agent or user failure kills that leaf (a ``dead`` node recording why)
and the search goes on with the others; a user-simulator failure is marked ``ErrorCategory.USER_ERROR`` on the node
it ended. A prompt that outgrew its model's context ends its branch instead (``ended``, with ``Node.ending`` and
the line in ``exception``): ``context_length`` on the leaf the agent could not answer, or on the turn whose tool
results outgrew it, ``user_context_length`` on the node the user could not answer, ``judge_context_length`` on a
finished branch the environment's judge could not score; the branch is a result, labelled and scored as any other.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from josh.core.agent import Agent, AgentTurn
from josh.core.env import ConversationState, Env
from josh.core.user import UserSimulator
from josh.run.diagnostics import classify, goal_tools_of
from josh.run.env_judge import judge_overflows
from josh.run.step import CONTEXT_LENGTH, JUDGE_CONTEXT_LENGTH, USER_CONTEXT_LENGTH, AgentStep, agent_step
from josh.run.user_turn import user_turn
from josh.search.tree import Node, Tree, TreeStats, chain_messages, transcript_of
from josh.types import Goal, Task, is_success


class SearchConfig(BaseModel):
    """Beam width, branching factor and horizon of the search."""

    model_config = ConfigDict(extra="forbid")

    max_beam: int = Field(8, ge=1, description="most live leaves after an expansion")
    branching: int = Field(2, ge=1, description="agent turns sampled per leaf while the beam has room")
    max_depth: int = Field(15, ge=1, description="most agent turns in one conversation")

    @property
    def expanded_turns(self) -> int:
        """The most agent turns one task's search can sample: every depth expands at most ``max_beam`` of them (the
        beam never holds more leaves), each followed by a user reply."""
        return self.max_depth * self.max_beam


@dataclass
class _Leaf:
    """A live branch: its node in the tree and its environment state (never persisted)."""

    node: Node
    state: ConversationState


class _Search:
    """The state of one task's search; ``run`` drives the steps."""

    def __init__(self, task: Task, env: Env, agent: Agent, user_sim: UserSimulator, config: SearchConfig) -> None:
        self.task = task
        self.env = env
        self.goal_tools = goal_tools_of(env)
        self._expected_failures: list[Goal] | None = None
        self.agent = agent
        self.user_sim = user_sim
        self.config = config
        self.n_goals = len(task.goals)
        self.credited: set[int] = set()
        self.best = 0
        self.tree_nodes: list[Node] = []
        self.since_root: list[Node] = []
        self.finished: list[tuple[_Leaf, str]] = []  # goal-less tasks: every ended branch and how it ended

    def _new_node(self, **fields: Any) -> Node:
        node = Node(id=len(self.tree_nodes), **fields)
        self.tree_nodes.append(node)
        self.since_root.append(node)
        return node

    def _lineage(self, node: Node) -> list[Node]:
        chain = [node]
        while chain[-1].parent is not None:
            chain.append(self.tree_nodes[chain[-1].parent])
        return chain[::-1]

    async def run(self, state: ConversationState) -> None:
        root = self._new_node()
        leaves = await self._user_step([_Leaf(root, state)])
        outcome = self.n_goals == 0
        while (
            leaves and (outcome or len(self.credited) < self.n_goals) and leaves[0].node.depth < self.config.max_depth
        ):
            k = self.config.branching if len(leaves) * self.config.branching <= self.config.max_beam else 1
            steps = await asyncio.gather(*(self._sample(leaf, k) for leaf in leaves))
            children = [child for leaf, step in zip(leaves, steps, strict=True) for child in self._grow(leaf, step)]
            leaves = [c for c in children if not c.node.ended] if outcome else self._credit(children)
            self.finished += [(c, c.node.ending or "terminated") for c in children if outcome and c.node.ended]
            if outcome or len(self.credited) < self.n_goals:
                leaves = await self._user_step(leaves)
        if outcome:
            self.finished += [(leaf, "max_turns") for leaf in leaves]
            self._rank()

    def _rank(self) -> None:
        """Goal-less tasks: score every finished branch with the final reward and label the tree by the best one."""
        for leaf, how in self.finished:
            leaf.state.ended = how
            with judge_overflows() as overflowed:
                leaf.node.reward = float(self.env.reward(leaf.state, chain_messages(self._lineage(leaf.node))))
            if overflowed:
                leaf.node.ending, leaf.node.exception = JUDGE_CONTEXT_LENGTH, f"judge: {overflowed[-1]}"
        scored = [leaf.node for leaf, _ in self.finished if leaf.node.reward]
        if not scored:
            return
        best = max(scored, key=lambda n: (n.reward or 0.0, -n.id))
        for node in self._lineage(best):
            node.ideal = True
        for other in scored:
            for node in self._lineage(other):
                node.partial = not node.ideal
        for node in self.tree_nodes[1:]:
            node.pruned = not (node.ideal or node.partial)

    def expected_failures(self) -> list[Goal]:
        """The task's expected failures, asked once the conversation has opened (a remote environment learns them
        from the episode's opening)."""
        if self._expected_failures is None:
            self._expected_failures = self.env.expected_failures(self.task)
        return self._expected_failures

    async def _sample(self, leaf: _Leaf, k: int) -> AgentStep:
        """Sample ``k`` agent turns from one leaf."""
        return await agent_step(self.agent, chain_messages(self._lineage(leaf.node)), leaf.state, k)

    def _grow(self, leaf: _Leaf, step: AgentStep) -> list[_Leaf]:
        """The children of one leaf, from its sampled turns; a failed call leaves one dead child recording why. Run
        in leaf order once every leaf's turns are back, so node ids never depend on which finished first."""
        parent = leaf.node
        if step.overflow:  # the agent cannot answer this leaf: its branch ends here
            parent.ended, parent.ending, parent.exception = True, CONTEXT_LENGTH, step.overflow
            if self.n_goals == 0:
                self.finished.append((leaf, CONTEXT_LENGTH))
            return []
        if step.failure:
            depth = parent.depth + 1
            self._new_node(parent=parent.id, depth=depth, dead=True, exception=step.failure, errors=step.errors)
            return []
        made = len(leaf.state.log)
        return [_Leaf(self._turn_node(parent, turn, made), turn.state) for turn in step.turns]

    def _turn_node(self, parent: Node, turn: AgentTurn, made: int) -> Node:
        """The node of one sampled turn; ``made`` calls were in the log before it (their verdicts are the parent's)."""
        done = set(turn.completed_goals) | set(turn.state.completed)
        new = sorted(g for g in done if 0 <= g < self.n_goals and g not in self.credited)
        return self._new_node(
            parent=parent.id,
            depth=parent.depth + 1,
            messages=list(turn.messages),
            reply=turn.reply,
            goals=new,
            ended=turn.terminated or turn.overflow is not None,
            ending=CONTEXT_LENGTH if turn.overflow else None,
            exception=f"agent: {turn.overflow}" if turn.overflow else None,
            errors=list(turn.errors),
            calls=classify(self.task.goals, turn.state.log, self.goal_tools, self.expected_failures())[made:],
            llm_calls=turn.llm_calls,
            prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens,
        )

    def _credit(self, children: list[_Leaf]) -> list[_Leaf]:
        """Collapse onto the best rewarded child, if any; returns the leaves that go on."""
        rewarded = [c for c in children if c.node.goals]
        if not rewarded:
            return [c for c in children if not c.node.ended]
        order = {id(c): i for i, c in enumerate(rewarded)}
        chosen = max(rewarded, key=lambda c: (len(c.node.goals), not c.node.ended, -order[id(c)]))
        for node in self._lineage(chosen.node):
            node.ideal = True
        for other in rewarded:
            if other is chosen:
                continue
            self.best = max(self.best, len(self.credited) + len(other.node.goals))
            for node in self._lineage(other.node):
                if not node.ideal:
                    node.partial = True
        for node in self.since_root:
            node.pruned = not (node.ideal or node.partial)
        self.credited.update(chosen.node.goals)
        self.best = max(self.best, len(self.credited))
        self.since_root = []
        return [] if chosen.node.ended else [chosen]

    async def _user_step(self, leaves: list[_Leaf]) -> list[_Leaf]:
        """Ask the user simulator to answer every live leaf concurrently; returns the leaves that go on."""
        replies = await asyncio.gather(*(self._ask_user(leaf) for leaf in leaves))
        return [leaf for leaf, alive in zip(leaves, replies, strict=True) if alive]

    async def _ask_user(self, leaf: _Leaf) -> bool:
        node = leaf.node
        if leaf.state.terminated:
            node.ended = True
            if self.n_goals == 0 and node.parent is None:
                self.finished.append((leaf, "terminated"))
            return False
        answer = await user_turn(self.env, leaf.state, self.user_sim, self.task, transcript_of(self._lineage(node)))
        node.user_calls = answer.calls
        node.user_llm_calls += answer.said.llm_calls
        node.prompt_tokens += answer.said.prompt_tokens
        node.completion_tokens += answer.said.completion_tokens
        node.errors.extend(answer.errors)
        if answer.failure:
            node.dead, node.exception = True, answer.failure
            return False
        if answer.overflow:
            node.ended, node.ending, node.exception = True, USER_CONTEXT_LENGTH, answer.overflow
            if self.n_goals == 0:
                self.finished.append((leaf, USER_CONTEXT_LENGTH))
            return False
        node.user, node.user_done = answer.said.text, answer.said.done
        node.ended = answer.said.done
        if answer.said.done and self.n_goals == 0:
            self.finished.append((leaf, "user_done"))
        return not answer.said.done


def _stats(nodes: list[Node], wall_s: float) -> TreeStats:
    return TreeStats(
        llm_calls=sum(n.llm_calls + n.user_llm_calls for n in nodes),
        prompt_tokens=sum(n.prompt_tokens for n in nodes),
        completion_tokens=sum(n.completion_tokens for n in nodes),
        wall_s=round(wall_s, 4),
        nodes=len(nodes),
        errors=sum(1 for n in nodes if n.dead),
        overflows=sum(1 for n in nodes if n.ending is not None),
    )


async def search(
    task: Task,
    env: Env,
    agent: Agent,
    user_sim: UserSimulator,
    config: SearchConfig | None = None,
) -> Tree:
    """Run the JOSH search on one task and return its tree; never raises for agent, user or task failures.

    The agent's frame (system prompt, preamble, tools, protocol) is stored in the tree so extraction can put it
    first and the viewer can read the turns."""
    config = config or SearchConfig()
    start = time.perf_counter()
    frame = agent.frame(task)
    tree = Tree(
        task_id=task.id,
        goals=list(task.goals),
        n_goals=len(task.goals),
        system=frame.system,
        preamble=frame.preamble,
        tools=frame.tools,
        protocol=frame.protocol,
        config=config.model_dump(),
    )
    if not task.goals and not env.outcome_reward:
        tree.error = "task has no goals: nothing to reward"
        tree.stats = _stats(tree.nodes, time.perf_counter() - start)
        return tree
    try:
        state = env.reset(task)
    except Exception as exc:  # a task the environment rejects is recorded, not fatal
        tree.error = f"env.reset failed: {type(exc).__name__}: {exc}"
        tree.stats = _stats(tree.nodes, time.perf_counter() - start)
        return tree
    run = _Search(task, env, agent, user_sim, config)
    await run.run(state)
    tree.nodes = run.tree_nodes
    if tree.n_goals:
        tree.reward = len(run.credited) / tree.n_goals
        tree.max_reward = run.best / tree.n_goals
        tree.success = len(run.credited) == tree.n_goals
    else:
        tree.reward = tree.max_reward = max((n.reward or 0.0 for n in run.tree_nodes), default=0.0)
        tree.success = is_success(tree.reward)
    tree.stats = _stats(tree.nodes, time.perf_counter() - start)
    return tree
