"""The rollout runner: JOSH search over many tasks at once, streamed to ``<out>/trees.jsonl``, resumable.

Up to ``concurrency`` tasks are searched at the same time, and inside each task every live leaf's request is in
flight together, so the backend sees all of them at once. Every finished task is appended to ``trees.jsonl`` as
one line and flushed to disk. Restarting the same command skips the task ids already finished in the file (a torn
last line left by a crash is cut off first); a tree recorded as ``failed`` (an LLM request failed, see
``josh.llm.health``) is searched again, and its new line supersedes the old one: the latest line of a task is its
tree, and once every task is finished the file is compacted to one line per task, in task order. ``stats.json`` (per-task and total LLM calls, turns cut short by LLM errors, tokens, wall time, reward, nodes,
failed and pending trees, and what produced the run) is rewritten from the whole file when the run ends, also after
a crash, Ctrl-C or SIGTERM; its ``wall_s`` adds up the sessions of the run (a session killed outright leaves no time
to add).
The runner takes constructed objects; ``rollout_from_options`` builds them from command-line options.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from josh.core.agent import Agent
from josh.core.env import Env
from josh.core.llm import Spent, failures_noted
from josh.core.user import UserSimulator
from josh.llm.health import stop_if_failing
from josh.run.components import ComponentOptions, build_components
from josh.run.info import RunInfo
from josh.run.resumable import RunSession, run_session
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from josh.types import ErrorCategory, Task
from josh.util.atomic import write_atomic
from josh.util.jsonl import iter_jsonl
from josh.util.layout import ROLLOUT_STATS as STATS_FILE
from josh.util.layout import TREES as TREES_FILE
from josh.util.progress import stage_progress


class RolloutConfig(BaseModel):
    """How the run is searched and scheduled."""

    search: SearchConfig = Field(default_factory=SearchConfig)
    concurrency: int = Field(16, ge=1, description="tasks searched at the same time")


class SearchCounts(Spent):
    """What searching spent and how its branches went, for one tree (``TaskStats``) or summed over trees
    (``RunStats``)."""

    nodes: int = 0
    errors: int = Field(0, description="dead nodes: the agent or user failed on that turn")
    llm_errors: int = Field(0, description="turns cut short by an LLM request that failed after its retries")
    endings: dict[str, int] = Field(
        default_factory=dict, description="branches ended by a prompt longer than its model's context, by ending"
    )

    def set_totals(self, parts: Sequence[SearchCounts]) -> None:
        """Make every count the sum of the ``parts``' counts."""
        for key in (*Spent.model_fields, "nodes", "errors", "llm_errors"):
            setattr(self, key, sum(getattr(part, key) for part in parts))
        self.endings = dict(sum((Counter(part.endings) for part in parts), Counter()))


class TaskStats(SearchCounts):
    """One task's line of ``stats.json``."""

    reward: float = 0.0
    max_reward: float = 0.0
    success: bool = False
    wall_s: float = 0.0
    error: str | None = None
    failed: str | None = None


class RunStats(SearchCounts):
    """``stats.json``: totals over every finished tree in ``trees.jsonl`` (the latest line of each task), the trees
    whose LLM failed counted apart (``failed``), and the per-task lines."""

    tasks: int = 0
    failed: int = Field(0, description="trees whose LLM failed: left out of the totals, searched again on rerun")
    success: int = 0
    mean_reward: float = 0.0
    failed_tasks: int = Field(0, description="tasks that could not be searched at all")
    summed_task_s: float = Field(0.0, description="search seconds summed over tasks (tasks run concurrently)")
    session_wall_s: float = Field(0.0, description="wall-clock seconds of this session of the command only")
    wall_s: float = Field(0.0, description="wall time of every session of the run so far, this one included")
    skipped_finished: int = Field(0, description="tasks found already finished in trees.jsonl and skipped")
    pending: int = Field(0, description="tasks of the run not finished (not searched yet, or failed): 0 when complete")
    run: RunInfo | None = None
    per_task: dict[str, TaskStats] = Field(default_factory=dict)


def _scan(trees_path: Path) -> Iterator[tuple[str, bool]]:
    """Each tree's task id and whether it failed, read line by line (a torn last line is cut off)."""
    for rec in iter_jsonl(trees_path, repair=True):
        if "task_id" in rec:
            yield str(rec["task_id"]), bool(rec.get("failed"))


def _read_key(value: Any) -> tuple[str, bool] | None:
    """A tree's task id and whether it failed, from one line of ``trees.jsonl``."""
    if not isinstance(value, dict) or "task_id" not in value:
        return None
    return str(value["task_id"]), bool(value.get("failed"))


def summarize(trees_path: Path) -> RunStats:
    """Statistics of the latest tree of each task in the file (read line by line; trees are never all held in
    memory); trees whose LLM failed are counted, not totalled."""
    stats = RunStats()
    for rec in iter_jsonl(trees_path):
        s = rec.get("stats") or {}
        task = TaskStats(
            reward=rec.get("reward", 0.0),
            max_reward=rec.get("max_reward", 0.0),
            success=bool(rec.get("success")),
            error=rec.get("error"),
            failed=rec.get("failed"),
            llm_errors=sum(str(e) == "llm_error" for n in rec.get("nodes") or [] for e in n.get("errors") or []),
            endings=dict(Counter(str(n["ending"]) for n in rec.get("nodes") or [] if n.get("ending"))),
            **{k: s.get(k, 0) for k in (*Spent.model_fields, "wall_s", "nodes", "errors")},
        )
        stats.per_task[str(rec.get("task_id"))] = task
    tasks = [t for t in stats.per_task.values() if not t.failed]
    stats.failed = len(stats.per_task) - len(tasks)
    stats.tasks = len(tasks)
    stats.success = sum(t.success for t in tasks)
    stats.mean_reward = round(sum(t.reward for t in tasks) / len(tasks), 4) if tasks else 0.0
    stats.set_totals(tasks)
    stats.failed_tasks = sum(1 for t in tasks if t.error)
    stats.summed_task_s = round(sum(t.wall_s for t in tasks), 3)
    return stats


def write_stats(
    out: Path,
    start: float,
    skipped: int,
    earlier_s: float = 0.0,
    run: RunInfo | None = None,
    wanted: set[str] | None = None,
) -> RunStats:
    """Summarise ``out/trees.jsonl`` into ``out/stats.json`` for a session that began at ``start`` (perf_counter),
    after earlier sessions that took ``earlier_s`` seconds; ``run`` says what produced the run, ``wanted`` its task
    ids (those not finished are ``pending``)."""
    stats = summarize(out / TREES_FILE)
    if wanted is not None:
        stats.pending = len(wanted - {task_id for task_id, t in stats.per_task.items() if not t.failed})
    stats.session_wall_s = round(time.perf_counter() - start, 3)
    stats.wall_s = round(earlier_s + stats.session_wall_s, 3)
    stats.skipped_finished = skipped
    stats.run = run
    write_atomic(out / STATS_FILE, json.dumps(stats.model_dump(), indent=2) + "\n")
    return stats


class _Display:
    """A rich progress bar with running goal, call and token counts (or nothing when disabled)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.goals = self.goal_total = self.calls = self.tokens = 0
        self.progress = stage_progress(
            TextColumn("[bold]rollout"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("goals {task.fields[goals]}  LLM calls {task.fields[calls]}  tokens {task.fields[tokens]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            enabled=enabled,
        )
        self.task_id = self.progress.add_task("rollout", total=total, goals="0/0", calls=0, tokens=0)

    def add(self, tree: Tree) -> None:
        self.goals += round(tree.reward * tree.n_goals)
        self.goal_total += tree.n_goals
        self.calls += tree.stats.llm_calls
        self.tokens += tree.stats.prompt_tokens + tree.stats.completion_tokens
        self.progress.update(
            self.task_id,
            advance=1,
            goals=f"{self.goals}/{self.goal_total}",
            calls=self.calls,
            tokens=self.tokens,
        )


async def search_task(task: Task, env: Env, agent: Agent, user_sim: UserSimulator, config: SearchConfig) -> Tree:
    """Search one task; a failure outside the agent and user (a bug) is recorded as a task that could not be
    searched, a search in which an LLM request failed after its retries as ``failed`` (``josh.llm.health``)."""
    start = time.perf_counter()
    with failures_noted() as noted:
        try:
            tree = await search(task, env, agent, user_sim, config)
        except Exception as exc:  # one broken task must not stop a long run
            tree = Tree(task_id=task.id, goals=list(task.goals), n_goals=len(task.goals), config=config.model_dump())
            tree.error = f"search failed: {type(exc).__name__}: {exc}"
            tree.stats.wall_s = round(time.perf_counter() - start, 4)
    if noted or any(ErrorCategory.LLM_ERROR in node.errors for node in tree.nodes):
        tree.failed = f"llm_error: {noted[-1] if noted else 'an agent LLM request failed'}"
    return tree


class RolloutSession(RunSession[Task, str]):
    """One session of a rollout run, whoever searches the tasks (this process, or Ray actors in
    ``josh.search.distributed``): ``josh.run.resumable``'s session over ``trees.jsonl`` (a task id twice is a
    ``DuplicateKeyError``), with the rollout's progress bar and ``stats.json`` over the whole file (``finish``)."""

    def __init__(
        self,
        tasks: Iterable[Task],
        out_dir: str | Path,
        *,
        progress: bool = True,
        on_tree: Callable[[Tree], Any] | None = None,
        run: RunInfo | None = None,
    ) -> None:
        self.out = Path(out_dir)
        super().__init__(
            list(tasks),
            lambda task: task.id,
            self.out / TREES_FILE,
            _scan,
            self.out / STATS_FILE,
            lambda total: _Display(total, progress),
            read_key=_read_key,
            what="task id",
            on_result=on_tree,
        )
        self.run = run
        self.console = self.display.progress.console

    def finish(self) -> RunStats:
        """Write ``stats.json`` over every tree of the run (call it however the session ended)."""
        return write_stats(self.out, self.start, self.skipped, self.earlier_s, self.run, self.wanted)


async def run_rollouts(
    tasks: Iterable[Task],
    env: Env,
    agent: Agent,
    user_sim: UserSimulator,
    out_dir: str | Path,
    config: RolloutConfig | None = None,
    *,
    progress: bool = True,
    on_tree: Callable[[Tree], Any] | None = None,
    guard: Callable[[], None] | None = None,
    run: RunInfo | None = None,
) -> RunStats:
    """Search every task not yet in ``out_dir/trees.jsonl`` and append its tree; returns the run's statistics.

    Two tasks with one id are a ``DuplicateKeyError``. ``on_tree`` is called after each tree is written; ``guard`` before, and
    may raise to stop the run (see ``josh.llm.health``); ``run`` goes into ``stats.json``."""
    config = config or RolloutConfig()
    tasks = list(tasks)
    if not tasks:
        raise ValueError("no tasks to search: the task list is empty")
    session = RolloutSession(tasks, out_dir, progress=progress, on_tree=on_tree, run=run)

    async def one(task: Task) -> Tree:
        return await search_task(task, env, agent, user_sim, config.search)

    return await run_session(session, one, session.finish, concurrency=config.concurrency, guard=guard)


class RolloutOptions(BaseModel):
    """What ``josh rollout`` builds the run from: the components (train split by default) and the search."""

    out: Path
    components: ComponentOptions = Field(default_factory=lambda: ComponentOptions(split="train"))
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)


def rollout_from_options(options: RolloutOptions, *, progress: bool = True) -> RunStats:
    """Build env, LLM(s), agent and user from ``options`` and run the rollouts to the end; a backend that is down
    stops the run (``BackendDownError``, see ``josh.llm.health``), also one that failed the last requests of a run
    that left failed trees."""
    built = build_components(options.components)
    try:
        stats = built.run(
            run_rollouts(
                built.tasks,
                built.env,
                built.agent,
                built.user,
                options.out,
                options.rollout,
                progress=progress,
                guard=lambda: stop_if_failing(built.llms),
                run=options.components.run_info(),
            )  # fmt: skip
        )
        if stats.failed:
            stop_if_failing(built.llms, ended=True)
        return stats
    finally:
        built.close()
