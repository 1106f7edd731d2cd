"""Which turns become training data: trimming an ideal path at its first failed turn, and the random-branch
control that ignores the reward."""

from __future__ import annotations

import json
import random

from josh.harvest.control import extract_random, random_branch, random_rows
from josh.harvest.extract import ExtractConfig, ExtractStats, extract_rows
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task

FULL = {(1,): (0,), (1, 0, 1): (1,)}  # the ideal path is root -> 1 -> 1.0 -> 1.0.1


async def grow(goals, task_id: str = "t0", **agent_kw) -> Tree:
    agent = TableAgent(goals=goals, **agent_kw)
    return await search(make_task(2, task_id), FakeEnv(), agent, TableUser(), SearchConfig())


def last_reply(row: dict) -> str:
    return row["messages"][-1]["content"]


async def test_a_failed_later_turn_is_trimmed_off_when_asked() -> None:
    tree = await grow(FULL, errors={(1, 0, 1)})
    strict = ExtractStats()
    assert extract_rows([tree], ExtractConfig(), strict).sft == [] and strict.with_errors == 1
    stats = ExtractStats()
    rows = extract_rows([tree], ExtractConfig(trim_at_failure=True), stats)
    assert (stats.accepted, stats.trimmed, stats.with_errors, stats.rewarded) == (1, 1, 0, 1)
    assert [last_reply(r) for r in rows.sft] == ["reply 1.0"]
    good = [r["completion"][-1]["content"] for r in rows.kto if r["label"]]
    assert good == ["reply 1", "reply 1.0"]  # the failed turn is not a positive
    assert all(r["chosen"][-1]["content"] != "reply 1.0.1" for r in rows.dpo)


async def test_a_failed_first_turn_leaves_nothing_to_trim_to() -> None:
    tree = await grow(FULL, errors={(1,)})
    stats = ExtractStats()
    assert extract_rows([tree], ExtractConfig(trim_at_failure=True), stats).sft == []
    assert (stats.accepted, stats.trimmed, stats.with_errors) == (0, 0, 1)


async def test_clean_paths_are_not_counted_as_trimmed() -> None:
    stats = ExtractStats()
    rows = extract_rows([await grow(FULL)], ExtractConfig(trim_at_failure=True), stats)
    assert stats.trimmed == 0 and last_reply(rows.sft[0]) == "reply 1.0.1"


async def test_random_branch_walks_to_a_leaf_through_real_children() -> None:
    tree = await grow(FULL)
    children = tree.children()
    seen = set()
    for seed in range(30):
        path = random_branch(tree, random.Random(seed))
        assert path[0].id == 0 and not children.get(path[-1].id)
        assert all(b.parent == a.id for a, b in zip(path, path[1:], strict=False))
        seen.add(tuple(n.id for n in path))
    assert len(seen) > 1  # different seeds take different branches


async def test_random_rows_ignore_the_reward_and_repeat_for_a_seed(tmp_path) -> None:
    unrewarded = await grow({}, task_id="none")
    rewarded = await grow(FULL, task_id="full")
    stats = ExtractStats()
    rows = random_rows([unrewarded, rewarded], ExtractConfig(min_reward=1.0), 3, stats)
    assert stats.sft == len(rows.sft) == 2 and stats.rewarded == 1 and stats.below_reward == 0
    again = random_rows([unrewarded, rewarded], ExtractConfig(), 3, ExtractStats())
    assert again.sft == rows.sft
    run = tmp_path / "run"
    run.mkdir()
    (run / "trees.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in (unrewarded, rewarded)))
    written = extract_random(run, tmp_path / "out", ExtractConfig(), 3)
    assert written.sft == 2 and not (tmp_path / "out" / "kto.jsonl").exists()  # no rows: no file
    assert [json.loads(line) for line in (tmp_path / "out" / "sft.jsonl").read_text().splitlines()] == rows.sft


async def test_a_row_limit_keeps_a_seeded_random_subset_in_tree_order() -> None:
    trees = [await grow({}, task_id=f"t{k}") for k in range(6)]
    every = random_rows(trees, ExtractConfig(), 5, ExtractStats()).sft
    stats = ExtractStats()
    some = random_rows(trees, ExtractConfig(), 5, stats, limit=3).sft
    assert len(some) == stats.sft == 3 and stats.random_pool == len(every) > 3
    assert [every.index(row) for row in some] == sorted(every.index(row) for row in some)
    assert random_rows(trees, ExtractConfig(), 5, ExtractStats(), limit=3).sft == some
    assert random_rows(trees, ExtractConfig(), 5, ExtractStats(), limit=9).sft == every


async def test_random_rows_count_the_branches_that_met_a_goal_anyway() -> None:
    either_turn = {(0,): (0,), (1,): (0,)}  # both first turns meet the goal: every branch is rewarded
    hits = [await grow(either_turn, task_id=f"hit{k}") for k in range(3)]
    misses = [await grow({}, task_id=f"miss{k}") for k in range(3)]
    stats = ExtractStats()
    assert len(random_rows(hits + misses, ExtractConfig(), 1, stats).sft) == 6 and stats.random_rewarded == 3
    hit_rows = random_rows(hits, ExtractConfig(), 1, ExtractStats()).sft
    some = ExtractStats()
    kept = random_rows(hits + misses, ExtractConfig(), 1, some, limit=4).sft
    assert some.random_rewarded == sum(row in hit_rows for row in kept) and len(kept) == 4


async def test_random_branches_follow_the_same_error_rule() -> None:
    tree = await grow({}, errors={(0,), (1,)})  # every first turn fails
    stats = ExtractStats()
    assert random_rows([tree], ExtractConfig(trim_at_failure=True), 0, stats).sft == []
    assert stats.with_errors == 1


async def test_a_failed_tree_is_never_harvested_and_its_rerun_supersedes_it(tmp_path) -> None:
    """``trees.jsonl`` as a rollout interrupted by a backend outage and resumed leaves it: a task's failed tree,
    then its finished one; another task failed and not yet redone. Only the finished tree gives rows."""
    from josh.harvest.extract import extract

    good, other = await grow(FULL), await grow(FULL, task_id="t1")
    failed = good.model_copy(update={"failed": "llm_error: Connection error."})
    lines = [failed, other.model_copy(update={"failed": "llm_error: Connection error."}), good]
    (tmp_path / "trees.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in lines))
    stats = extract(tmp_path / "trees.jsonl", tmp_path / "out")
    assert (stats.trees, stats.llm_failed, stats.accepted) == (1, 1, 1)
    assert json.loads((tmp_path / "out" / "sft.jsonl").read_text().splitlines()[0])["messages"][-1]["content"] == (
        "reply 1.0.1"
    )
    assert len((tmp_path / "out" / "sft.jsonl").read_text().splitlines()) == 1
