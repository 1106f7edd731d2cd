"""Evaluation runner: an agent/user pair over a split, K trials, concurrent, resumable.

Writes ``<out>/results.jsonl`` (one line per finished conversation, with its full transcript) and
``<out>/summary.json``. A killed run restarted with the same output folder skips the (task, trial) pairs already
finished in ``results.jsonl``; a conversation recorded as ``failed`` (an LLM request failed, see
``josh.llm.health``) is run again, and its new line supersedes the old one (the file stays append-only: the latest
line of a (task, trial) is its record). An interrupted run (Ctrl-C or SIGTERM) still writes ``summary.json`` over what it finished;
its ``wall_s`` adds up the sessions of the run (a session killed outright, SIGKILL, leaves no time to add).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from josh.agents.base import Agent
from josh.envs.base import Env
from josh.eval.metrics import Summary, summarize
from josh.run.conversation import ConversationRecord, run_conversation
from josh.run.info import RunInfo
from josh.types import Task
from josh.users.base import UserSimulator
from josh.util.atomic import write_atomic
from josh.util.interrupt import terminate_like_interrupt
from josh.util.jsonl import JsonlWriter, read_models
from josh.util.layout import RESULTS, SUMMARY
from josh.util.progress import stage_progress


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
    ``josh.llm.health``); ``run`` is stored in the summary as the run's provenance."""
    if not tasks:
        raise ValueError("no tasks to evaluate: the task list is empty")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError("task ids must be unique within an evaluation")
    done = finished(load_results(out))
    todo = [(task, k) for k in range(trials) for task in tasks if (task.id, k) not in done]
    earlier_s = _earlier_wall_s(out) if done else 0.0
    start = time.perf_counter()

    async def converse(task: Task, trial: int) -> ConversationRecord:
        record = await run_conversation(env, task, agent, user_sim, max_turns=max_turns, trial=trial)
        if guard is not None:
            guard()
        return record

    with terminate_like_interrupt():
        try:
            await _run_pending(converse, todo, out / RESULTS, concurrency, show_progress)
        finally:
            wanted = {(t.id, k) for t in tasks for k in range(trials)}
            records = [r for r in load_results(out) if (r.task_id, r.trial) in wanted]
            wall_s = round(earlier_s + time.perf_counter() - start, 3)
            summary = summarize(records, cost=cost() if cost else 0.0, wall_s=wall_s)
            summary.pending = len(wanted - finished(records))
            summary.run = run
            summary.reward_notes = dict(env.reward_notes)
            write_atomic(out / SUMMARY, json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
    return summary


async def _run_pending(
    converse: Callable[[Task, int], Awaitable[ConversationRecord]],
    todo: list[tuple[Task, int]],
    path: Path,
    concurrency: int,
    show_progress: bool,
) -> None:
    """Hold every pending conversation, ``concurrency`` at a time, appending each record as it finishes."""
    gate = asyncio.Semaphore(max(1, concurrency))
    with JsonlWriter(path) as writer, _progress(show_progress, len(todo)) as (progress, bar):

        async def one(task: Task, trial: int) -> None:
            async with gate:
                record = await converse(task, trial)
            writer.write(record)
            if progress is not None:
                progress.advance(bar)

        jobs = [asyncio.ensure_future(one(t, k)) for t, k in todo]
        try:
            await asyncio.gather(*jobs)
        finally:  # a failed conversation (e.g. the guard) stops the others before they write
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)


def finished_count(out_dir: str | Path, tasks: Sequence[Task], trials: int) -> int:
    """How many of the run's (task, trial) conversations ``results.jsonl`` already holds finished (a rerun skips
    them)."""
    wanted = {(t.id, k) for t in tasks for k in range(trials)}
    return len(finished(load_results(out_dir)) & wanted)


def _earlier_wall_s(out: Path) -> float:
    """The wall time the run's earlier sessions recorded in ``summary.json`` (0 when there is none to read)."""
    try:
        earlier = json.loads((out / SUMMARY).read_text(encoding="utf-8")).get("wall_s", 0.0)
    except (OSError, ValueError, AttributeError):
        return 0.0
    return float(earlier) if isinstance(earlier, int | float) and earlier >= 0 else 0.0


class _progress:
    """A rich progress bar, or nothing."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.progress = (
            stage_progress(
                TextColumn("conversations"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
            )
            if enabled
            else None
        )
        self.total = total

    def __enter__(self) -> tuple[Progress | None, int]:
        if self.progress is None:
            return None, 0
        self.progress.start()
        return self.progress, self.progress.add_task("conversations", total=self.total)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
