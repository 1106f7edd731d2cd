"""Evaluation runner: an agent/user pair over a split, K trials, concurrent, resumable.

Writes ``<out>/results.jsonl`` (one line per finished conversation, with its full transcript) and
``<out>/summary.json``. A killed run restarted with the same output folder skips the (task, trial) pairs already
finished in ``results.jsonl``; a conversation recorded as ``failed`` (an LLM request failed, see
``josh.llm.health``) is run again, and its new line supersedes the old one (while the run streams, the latest line
of a (task, trial) is its record; once every conversation is finished the file is compacted to one line each, by
task then trial). An interrupted run (Ctrl-C or SIGTERM) still writes ``summary.json`` over what it finished;
its ``wall_s`` adds up the sessions of the run (a session killed outright, SIGKILL, leaves no time to add). The
resuming, concurrency and failure handling are ``josh.run.resumable``'s, shared with the rollout runner.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from josh.core.agent import Agent
from josh.core.env import Env
from josh.core.user import UserSimulator
from josh.eval.metrics import Summary, summarize
from josh.run.conversation import ConversationRecord, run_conversation
from josh.run.info import RunInfo
from josh.run.resumable import Counted, RunSession, require_unique, run_session
from josh.types import Task
from josh.util.atomic import write_atomic
from josh.util.jsonl import read_models
from josh.util.layout import RESULTS, SUMMARY


def load_results(out_dir: str | Path) -> list[ConversationRecord]:
    """The records of a (possibly interrupted) run, the latest line of each (task, trial) (a rerun supersedes a
    failed one), in the order they first appear; a torn last line is cut off, any other bad line is a
    ``CorruptLineError`` naming the file and line."""
    path = Path(out_dir) / RESULTS
    latest: dict[tuple[str, int], ConversationRecord] = {}
    for record in read_models(path, ConversationRecord, "a conversation record", repair=True):
        latest[(record.task_id, record.trial)] = record
    return list(latest.values())


def load_finished(out_dir: str | Path) -> list[ConversationRecord]:
    """The run's results: ``load_results`` without the ``failed`` records (no result; a rerun redoes them)."""
    return [r for r in load_results(out_dir) if r.failed is None]


def finished(records: Iterable[ConversationRecord]) -> set[tuple[str, int]]:
    """The (task, trial) keys of the records that are results (not ``failed``): what a rerun skips."""
    return {(r.task_id, r.trial) for r in records if r.failed is None}


async def evaluate(
    env: Env,
    tasks: Sequence[Task],
    agent: Agent,
    user_sim: UserSimulator,
    out_dir: str | Path,
    *,
    trials: int = 1,
    concurrency: int = 8,
    max_turns: int = 15,
    cost: Callable[[], float] | None = None,
    show_progress: bool = False,
    guard: Callable[[], None] | None = None,
    run: RunInfo | None = None,
) -> Summary:
    """Run every (task, trial) not yet finished in ``results.jsonl`` and write ``summary.json`` over all of them.

    ``guard`` is called before each result is written and may raise to stop the run (e.g. a dead backend, see
    ``josh.llm.health``); ``run`` is stored in the summary as the run's provenance. Two tasks with one id are a
    ``DuplicateKeyError``."""
    if not tasks:
        raise ValueError("no tasks to evaluate: the task list is empty")
    require_unique((t.id for t in tasks), "task id")
    out = Path(out_dir)
    pieces = [(task, k) for k in range(trials) for task in tasks]
    session: RunSession[tuple[Task, int], tuple[str, int]] = RunSession(
        pieces,
        lambda piece: (piece[0].id, piece[1]),
        out / RESULTS,
        _scan,
        out / SUMMARY,
        lambda total: Counted("conversations", total, show_progress),
        read_key=_read_key,
        what="task id",
        order=[(task.id, k) for task in tasks for k in range(trials)],
    )

    async def converse(piece: tuple[Task, int]) -> ConversationRecord:
        task, trial = piece
        return await run_conversation(env, task, agent, user_sim, max_turns=max_turns, trial=trial)

    def finish() -> Summary:
        records = [r for r in load_results(out) if (r.task_id, r.trial) in session.wanted]
        summary = summarize(records, cost=cost() if cost else 0.0, wall_s=session.wall_s())
        summary.pending = len(session.wanted - finished(records))
        summary.run = run
        summary.reward_notes = dict(env.reward_notes)
        write_atomic(out / SUMMARY, json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
        return summary

    return await run_session(session, converse, finish, concurrency=concurrency, guard=guard)


def _scan(path: Path) -> Iterator[tuple[tuple[str, int], bool]]:
    """(task, trial) and whether failed, for each record of ``results.jsonl`` (a torn last line cut off)."""
    for record in read_models(path, ConversationRecord, "a conversation record", repair=True):
        yield (record.task_id, record.trial), record.failed is not None


def _read_key(value: Any) -> tuple[tuple[str, int], bool] | None:
    """(task, trial) and whether failed, from one line of ``results.jsonl``."""
    if not isinstance(value, dict) or "task_id" not in value:
        return None
    return (str(value["task_id"]), int(value.get("trial", 0))), value.get("failed") is not None


def finished_count(out_dir: str | Path, tasks: Sequence[Task], trials: int) -> int:
    """How many of the run's (task, trial) conversations ``results.jsonl`` already holds finished (a rerun skips
    them)."""
    wanted = {(t.id, k) for t in tasks for k in range(trials)}
    return len(finished(load_results(out_dir)) & wanted)
