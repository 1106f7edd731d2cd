"""A run that is killed outright (SIGKILL) at a chosen point: the subject of the compaction tests.

``python -m tests.fakes.killed_run KIND OUT [--fail IDS] [--kill POINT]`` runs a ``josh eval`` (KIND ``eval``: the
first four test tasks of the mini set, two trials) or a ``josh rollout`` (``rollout``: the first six train tasks) of
the oracle agent and the agenda user into OUT. ``--fail``: task ids whose agent turns fail like an LLM that is down
(their records are ``failed``, done again by the next run). ``--kill record:N``: the process writes the first half of
its N-th record's line and kills itself; ``--kill compaction``: it kills itself when the compacted file, written
beside the old one, is about to be renamed over it. The kill points are this script's patches of the running
process, not hooks in josh.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import josh.util.compaction
from josh.core.agent import Agent, AgentTurn, PromptFrame
from josh.core.env import ConversationState
from josh.eval.evaluate import evaluate
from josh.run.components import ComponentOptions, Components, build_components
from josh.search.rollout import RolloutConfig, run_rollouts
from josh.types import ErrorCategory, Message, Task
from josh.util.jsonl import JsonlWriter, json_line

TRIALS = 2


class Failing:
    """``agent``, except that on the tasks ``ids`` every turn fails as an LLM that is down would make it."""

    def __init__(self, agent: Agent, ids: set[str]) -> None:
        self.agent, self.ids = agent, ids

    def frame(self, task: Task) -> PromptFrame:
        return self.agent.frame(task)

    async def turn(self, history: list[Message], state: ConversationState, *, n: int = 1) -> list[AgentTurn]:
        if state.task.id not in self.ids:
            return await self.agent.turn(history, state, n=n)
        return [AgentTurn(state=state.fork(), errors=[ErrorCategory.LLM_ERROR], llm_calls=1) for _ in range(n)]


def components(kind: str) -> Components:
    """The oracle and the agenda user on the mini set: four test tasks for ``eval``, six train tasks for ``rollout``."""
    split, limit = ("test", 4) if kind == "eval" else ("train", 6)
    return build_components(ComponentOptions(agent="oracle", user="agenda", data="mini", split=split, limit=limit))


def run(kind: str, out: Path, fail: frozenset[str] = frozenset()) -> Any:
    """One session of the run into ``out``; its summary (eval) or statistics (rollout)."""
    built = components(kind)
    agent = Failing(built.agent, set(fail)) if fail else built.agent
    if kind == "eval":
        work = evaluate(built.env, built.tasks, agent, built.user, out, trials=TRIALS, concurrency=3)
    else:
        work = run_rollouts(
            built.tasks, built.env, agent, built.user, out, RolloutConfig(concurrency=3), progress=False
        )
    return built.run(work)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at_record(n: int) -> None:
    """Kill this process half-way through writing its ``n``-th record."""
    write = JsonlWriter.write
    written = 0

    def cut(self: JsonlWriter, record: Any) -> None:
        nonlocal written
        written += 1
        if written < n:
            write(self, record)
            return
        line, _ = json_line(record)
        self._file.write(line[: len(line) // 2])
        self._file.flush()
        _die()

    JsonlWriter.write = cut  # type: ignore[method-assign]


def kill_at_compaction() -> None:
    """Kill this process when the compacted file is written beside the old one, before the rename."""
    josh.util.compaction.replace_synced = lambda written, path: _die()  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["eval", "rollout"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--fail", default="")
    parser.add_argument("--kill", default="")
    args = parser.parse_args()
    if args.kill.startswith("record:"):
        kill_at_record(int(args.kill.removeprefix("record:")))
    elif args.kill == "compaction":
        kill_at_compaction()
    run(args.kind, args.out, frozenset(i for i in args.fail.split(",") if i))


if __name__ == "__main__":
    main()
