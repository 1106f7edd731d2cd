"""How well the JOSH search schedules requests: concurrent leaves and tasks vs. one request at a time.

Every LLM request goes to the scripted backend with a simulated latency (default 50 ms) and no concurrency limit.
The agent makes one ``n``-sample request per leaf per turn; the user simulator one request per reply. Whether a
sampled turn completes the next goal is a hash of the conversation so far, so both runs grow identical trees.

Printed:
* wall time of the concurrent run (all tasks in flight, all leaves of a step together);
* the critical-path bound: the longest chain of dependent requests in any tree × latency (a step waits for its
  slowest leaf, so per depth the chain grows by the agent's and the user's requests);
* the same run with one request at a time (every leaf's request awaited after the previous one, as the original
  code does);
* node size vs. depth: a node stores only its own turn, while the conversation it ends grows with depth.

Targets: wall <= 1.3 x bound and >= 20 x faster than one at a time.

    python benchmarks/search_scheduling.py [--tasks 32] [--latency 0.05] [--skip-serial]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from collections import defaultdict
from typing import Any

from josh.core.agent import AgentTurn, PromptFrame
from josh.core.env import ConversationState, EnvBase
from josh.core.llm import LLM, Completion
from josh.core.user import UserTurn
from josh.llm.scripted import ScriptedLLM
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree, path_messages
from josh.types import Goal, Message, Task, assistant


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _policy(messages: list[Message], tools: Any, index: int) -> str:
    last = messages[-1].content if messages else ""
    return f"sample {index} after {len(messages)} messages: {hashlib.sha256(str(last).encode()).hexdigest()[:12]}"


class Serial:
    """Wraps a backend so that only one request is in flight at a time (the original code's schedule)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.usage = llm.usage
        self.lock = asyncio.Lock()

    async def chat(self, messages: list[Message], **kwargs: Any) -> list[Completion]:
        async with self.lock:
            return await self.llm.chat(messages, **kwargs)


class BenchAgent:
    """One ``n``-sample request per leaf; a sample completes the next goal with probability ``goal_chance``."""

    def __init__(self, llm: Any, goal_chance: float) -> None:
        self.llm = llm
        self.goal_chance = goal_chance

    def frame(self, task: Task) -> PromptFrame:
        return PromptFrame()

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        completions = await self.llm.chat(history, n=n)
        turns = []
        for j, completion in enumerate(completions):
            fork = state.fork()
            remaining = fork.remaining
            done = (
                [remaining[0]]
                if remaining and _unit(state.task.id, len(history), completion.text, j) < self.goal_chance
                else []
            )
            fork.completed.update(done)
            text = f"{completion.text} / {j}"
            turns.append(
                AgentTurn(messages=[assistant(text)], reply=text, state=fork, completed_goals=done, llm_calls=1)
            )
        return turns


class BenchUser:
    """One request per reply; never ends the conversation (the search's horizon does)."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    async def reply(self, task: Task, transcript: list[Message]) -> UserTurn:
        (completion,) = await self.llm.chat(transcript or [Message(role="system", content=task.id)], n=1)
        return UserTurn(text=completion.text, llm_calls=1)


def make_tasks(n: int) -> list[Task]:
    """The mini ToolWOZ train tasks when available (their goal counts), else synthetic 1-3 goal tasks."""
    try:
        from josh.envs.toolwoz.data import load_toolwoz

        tasks = load_toolwoz("mini").splits["train"][:n]
    except Exception:
        tasks = []
    if len(tasks) < n:
        tasks += [
            Task(env="synthetic", id=f"synthetic{i}", goals=[Goal(name=f"g{g}") for g in range(1 + i % 3)])
            for i in range(n - len(tasks))
        ]
    return [t for t in tasks if t.goals][:n]


class PlainEnv(EnvBase):
    name, tools = "bench", []

    def reset(self, task: Task) -> ConversationState:
        return ConversationState(task)


async def run(
    tasks: list[Task], config: SearchConfig, latency: float, goal_chance: float, serial: bool
) -> tuple[float, list[Tree], int]:
    backend = ScriptedLLM(_policy, latency_s=latency)
    llm = Serial(backend) if serial else backend
    agent, user = BenchAgent(llm, goal_chance), BenchUser(llm)
    start = time.perf_counter()
    trees = await asyncio.gather(*(search(t, PlainEnv(), agent, user, config) for t in tasks))  # type: ignore[arg-type]
    return time.perf_counter() - start, list(trees), backend.usage.calls


def critical_chain(tree: Tree) -> int:
    """Longest chain of dependent requests: the opening reply, then per depth the slowest agent and user calls."""
    agent, user = defaultdict(int), defaultdict(int)
    for n in tree.nodes:
        agent[n.depth] = max(agent[n.depth], min(n.llm_calls, 1) if n.depth else 0)
        user[n.depth] = max(user[n.depth], n.user_llm_calls)
    return sum(agent.values()) + sum(user.values())


def node_sizes(trees: list[Tree]) -> dict[int, tuple[float, float]]:
    """Mean bytes of a node's JSON and of the conversation up to it, by depth."""
    by_depth: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tree in trees:
        for n in tree.nodes:
            convo = sum(len(m.model_dump_json()) for m in path_messages(tree, n.id))
            by_depth[n.depth].append((len(n.model_dump_json()), convo))
    return {d: (sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for d, v in sorted(by_depth.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--beam", type=int, default=8)
    parser.add_argument("--branching", type=int, default=2)
    parser.add_argument("--max-depth", type=int, default=15)
    parser.add_argument("--goal-chance", type=float, default=0.1, help="chance that one sampled turn hits a goal")
    parser.add_argument("--skip-serial", action="store_true", help="do not run the one-at-a-time baseline")
    args = parser.parse_args()
    tasks = make_tasks(args.tasks)
    config = SearchConfig(max_beam=args.beam, branching=args.branching, max_depth=args.max_depth)
    wall, trees, requests = asyncio.run(run(tasks, config, args.latency, args.goal_chance, serial=False))
    chain = max(critical_chain(t) for t in trees)
    bound = chain * args.latency
    print(
        f"tasks {len(tasks)}  goal chance {args.goal_chance}  beam {args.beam}  branching {args.branching}  latency {args.latency * 1000:.0f} ms"
    )
    print(f"requests {requests}  nodes {sum(len(t.nodes) for t in trees)}  success {sum(t.success for t in trees)}")
    print(f"concurrent wall        {wall:8.2f} s")
    print(
        f"critical-path bound    {bound:8.2f} s   ({chain} dependent requests)   wall/bound = {wall / bound:.2f}  (target <= 1.3)"
    )
    if not args.skip_serial:
        serial_wall, serial_trees, serial_requests = asyncio.run(
            run(tasks, config, args.latency, args.goal_chance, serial=True)
        )
        same = [t.model_dump(exclude={"stats"}) for t in trees] == [
            t.model_dump(exclude={"stats"}) for t in serial_trees
        ]
        print(f"one request at a time  {serial_wall:8.2f} s   ({serial_requests} requests; identical trees: {same})")
        print(f"speed-up vs one at a time: {serial_wall / wall:.1f}x  (target >= 20)")
    print("memory per node (mean JSON bytes): depth, node, conversation up to it")
    for depth, (node, convo) in node_sizes(trees).items():
        if depth in (0, 1, 2, 4, 8, 12, 15):
            print(f"  {depth:3d}  {node:8.0f}  {convo:10.0f}")


if __name__ == "__main__":
    main()
