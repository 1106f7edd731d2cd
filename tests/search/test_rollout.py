"""The rollout runner: streaming, statistics, crash-and-resume, torn last lines, task-level concurrency."""

from __future__ import annotations

import json

import pytest

from josh.run.resumable import DuplicateKeyError
from josh.search.algorithm import SearchConfig
from josh.search.rollout import STATS_FILE, TREES_FILE, RolloutConfig, run_rollouts
from josh.search.tree import Tree
from josh.util.jsonl import iter_jsonl
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task


class Crash(Exception):
    """Stands in for a killed process."""


def tasks(n: int, n_goals: int = 2):
    return [make_task(n_goals, f"task{i:02d}") for i in range(n)]


def agent() -> TableAgent:
    return TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


CONFIG = RolloutConfig(search=SearchConfig(max_depth=4), concurrency=3)


async def test_every_task_written_once_with_stats(tmp_path) -> None:
    stats = await run_rollouts(tasks(5), FakeEnv(), agent(), TableUser(), tmp_path, CONFIG, progress=False)
    records = lines(tmp_path / TREES_FILE)
    assert sorted(r["task_id"] for r in records) == [f"task{i:02d}" for i in range(5)]
    tree = Tree.model_validate(records[0])
    assert tree.success and tree.nodes and tree.config["max_depth"] == 4
    on_disk = json.loads((tmp_path / STATS_FILE).read_text())
    assert on_disk["tasks"] == 5 and on_disk["success"] == 5 and on_disk["mean_reward"] == 1.0
    assert on_disk["llm_calls"] == 5 * 12 == stats.llm_calls
    assert set(on_disk["per_task"]["task03"]) >= {"llm_calls", "prompt_tokens", "wall_s", "max_reward", "nodes"}


async def test_crash_then_resume_has_no_duplicates(tmp_path) -> None:
    written: list[str] = []

    def die_after_three(tree: Tree) -> None:
        written.append(tree.task_id)
        if len(written) == 3:
            raise Crash

    with pytest.raises(Crash):
        await run_rollouts(
            tasks(8), FakeEnv(), agent(), TableUser(), tmp_path, CONFIG, progress=False, on_tree=die_after_three
        )
    first = [r["task_id"] for r in lines(tmp_path / TREES_FILE)]
    assert len(first) == 3 and json.loads((tmp_path / STATS_FILE).read_text())["tasks"] == 3
    again = agent()
    stats = await run_rollouts(tasks(8), FakeEnv(), again, TableUser(), tmp_path, CONFIG, progress=False)
    ids = [r["task_id"] for r in lines(tmp_path / TREES_FILE)]
    assert len(ids) == len(set(ids)) == 8 and ids[:3] == first
    assert stats.skipped_finished == 3 and stats.tasks == 8
    assert len(again.calls) == 5 * 4


async def test_torn_last_line_is_cut_and_the_task_rerun(tmp_path) -> None:
    await run_rollouts(tasks(3), FakeEnv(), agent(), TableUser(), tmp_path, CONFIG, progress=False)
    path = tmp_path / TREES_FILE
    text = path.read_text()
    keep = text.splitlines(keepends=True)[:2]
    path.write_text("".join(keep) + text.splitlines()[2][:50])
    assert len(list(iter_jsonl(path, repair=True))) == 2 and path.read_text() == "".join(keep)
    await run_rollouts(tasks(3), FakeEnv(), agent(), TableUser(), tmp_path, CONFIG, progress=False)
    assert sorted(r["task_id"] for r in lines(path)) == ["task00", "task01", "task02"]


async def test_failures_are_recorded_and_counted(tmp_path) -> None:
    mixed = [*tasks(2), make_task(0, "empty")]
    broken = TableAgent(raises={()})
    stats = await run_rollouts(mixed, FakeEnv(), broken, TableUser(), tmp_path, CONFIG, progress=False)
    assert stats.tasks == 3 and stats.failed_tasks == 1 and stats.errors == 2 and stats.success == 0
    assert "no goals" in stats.per_task["empty"].error


async def test_concurrency_is_capped(tmp_path) -> None:
    slow = TableAgent(delay=0.02)
    user = TableUser()
    config = RolloutConfig(search=SearchConfig(max_depth=1, max_beam=2), concurrency=2)
    stats = await run_rollouts(tasks(4), FakeEnv(), slow, user, tmp_path, config, progress=False)
    assert stats.tasks == 4 and len(slow.calls) == 4
    assert slow.peak == 2


async def test_duplicate_task_ids_are_an_error_before_anything_runs(tmp_path) -> None:
    slow = TableAgent()
    with pytest.raises(DuplicateKeyError, match="task id must appear once.*task01"):
        await run_rollouts([*tasks(2), *tasks(2)], FakeEnv(), slow, TableUser(), tmp_path, CONFIG, progress=False)
    assert not slow.calls and not (tmp_path / TREES_FILE).exists()


async def test_system_prompt_comes_from_the_agent(tmp_path) -> None:
    class Prompted(TableAgent):
        def frame(self, task):
            return super().frame(task).model_copy(update={"system": f"You help with {task.id}."})

    await run_rollouts(tasks(1), FakeEnv(), Prompted(), TableUser(), tmp_path, CONFIG, progress=False)
    assert lines(tmp_path / TREES_FILE)[0]["system"] == "You help with task00."
