"""Turn-level advantages from search trees: hand-built trees with hand-computed values, properties on random trees,
and ``josh extract --format tree``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from josh.cli.main import app
from josh.harvest.advantages import (
    AdvantageConfig,
    AdvantageStats,
    advantage_rows,
    leave_one_out,
    path_rewards,
    sibling_groups,
    subtree_rewards,
)
from josh.search.tree import Node, Tree
from josh.types import assistant

# (id, parent, goals, ideal); every node but the root says "turn <id>" and the user answers "user <id>"
Spec = list[tuple[int, int | None, tuple[int, ...], bool]]

# Two goals. Step 1: the root branches into 1, 2; step 2: each branches again (3, 4 | 5, 6); step 3 (beam full,
# one turn per leaf): 9 completes goal 0, so the search collapses onto 0-2-5-9 and prunes the rest. From 9: 11, 12;
# 11's child 13 completes goal 1.
TWO_SEGMENTS: Spec = [
    (0, None, (), True),
    (1, 0, (), False), (2, 0, (), True),
    (3, 1, (), False), (4, 1, (), False), (5, 2, (), True), (6, 2, (), False),
    (7, 3, (), False), (8, 4, (), False), (9, 5, (0,), True), (10, 6, (), False),
    (11, 9, (), True), (12, 9, (), False),
    (13, 11, (1,), True), (14, 12, (), False),
]  # fmt: skip


def build(spec: Spec, n_goals: int = 2, *, no_turn: tuple[int, ...] = (), task_id: str = "t") -> Tree:
    nodes = []
    depth: dict[int, int] = {}
    for node_id, parent, goals, ideal in spec:
        depth[node_id] = 0 if parent is None else depth[parent] + 1
        turn = [] if parent is None or node_id in no_turn else [assistant(f"turn {node_id}")]
        nodes.append(
            Node(id=node_id, parent=parent, depth=depth[node_id], messages=turn, goals=list(goals), ideal=ideal,
                 user=f"user {node_id}", reply=f"turn {node_id}" if turn else None)
        )  # fmt: skip
    return Tree(task_id=task_id, n_goals=n_goals, system="SYS", tools=[{"name": "find"}], nodes=nodes)


def test_path_rewards_count_each_goal_on_the_lineage_once() -> None:
    paths = path_rewards(build(TWO_SEGMENTS))
    assert [paths[i] for i in (0, 2, 5, 8, 9, 10, 11, 12, 13, 14)] == [0, 0, 0, 0, 0.5, 0, 0.5, 0.5, 1.0, 0.5]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        # node:   1    2     3    4    5    6    9    11   12
        ("max", [0.0, 0.5, 0.0, 0.0, 0.5, 0.0, 0.5, 1.0, 0.5]),
        ("mean", [0.0, 0.25, 0.0, 0.0, 0.5, 0.0, 0.5, 1.0, 0.5]),
    ],
)
def test_subtree_rewards_stop_at_the_reward_event(how: str, expected: list[float]) -> None:
    values = subtree_rewards(build(TWO_SEGMENTS), how)  # type: ignore[arg-type]
    assert [values[i] for i in (1, 2, 3, 4, 5, 6, 9, 11, 12)] == expected


@pytest.mark.parametrize(
    ("how", "groups"),
    [
        ("max", {0: ([1, 2], [-0.5, 0.5]), 1: ([3, 4], [0.0, 0.0]), 2: ([5, 6], [0.5, -0.5]), 9: ([11, 12], [0.5, -0.5])}),
        ("mean", {0: ([1, 2], [-0.25, 0.25]), 1: ([3, 4], [0.0, 0.0]), 2: ([5, 6], [0.5, -0.5]), 9: ([11, 12], [0.5, -0.5])}),
    ],
)  # fmt: skip
def test_sibling_groups_and_their_advantages(how: str, groups: dict[int, tuple[list[int], list[float]]]) -> None:
    found = sibling_groups(build(TWO_SEGMENTS), AdvantageConfig(subtree=how))  # type: ignore[arg-type]
    assert {g.parent: (g.turns, g.advantages) for g in found} == groups


def test_three_siblings_get_leave_one_out_advantages() -> None:
    spec: Spec = [(0, None, (), False), (1, 0, (0, 1), False), (2, 0, (), False), (3, 0, (0,), False)]
    (group,) = sibling_groups(build(spec))
    assert group.rewards == [1.0, 0.0, 0.5]
    assert group.advantages == [0.75, -0.75, 0.0]  # 1 - (0 + .5)/2, 0 - (1 + .5)/2, .5 - (1 + 0)/2


def test_turns_that_tie_at_the_reward_event_tie_whatever_grew_after() -> None:
    # 1 and 2 both complete goal 0 in the same step; the search keeps 1 (ideal) and 2 is partial credit. Goal 1 is
    # completed later below 1: that belongs to the next segment, so 1 and 2 tie.
    spec: Spec = [(0, None, (), True), (1, 0, (0,), True), (2, 0, (0,), False), (3, 1, (), True), (4, 3, (1,), True)]
    (group,) = sibling_groups(build(spec))
    assert group.rewards == [0.5, 0.5] and not group.informative


def test_a_failed_expansion_is_not_a_sibling_turn_and_a_failed_task_has_no_groups() -> None:
    spec: Spec = [(0, None, (), False), (1, 0, (), False), (2, 0, (), False)]
    assert sibling_groups(build(spec, no_turn=(2,))) == []
    failed = build(spec)
    failed.error = "env.reset failed"
    assert sibling_groups(failed) == []


def test_rows_hold_the_shared_prompt_one_turn_and_its_advantage_and_zero_groups_are_counted() -> None:
    stats = AdvantageStats()
    rows = advantage_rows([build(TWO_SEGMENTS, task_id="a"), build(TWO_SEGMENTS, task_id="b")], stats=stats)
    assert (stats.groups, stats.zero_groups, stats.rows) == (8, 2, 12)
    first, second = rows[0], rows[1]
    assert first["group"] == second["group"] == "a#0"
    assert first["prompt"] == [{"role": "system", "content": "SYS"}, {"role": "user", "content": "user 0"}]
    assert first["completion"] == [{"role": "assistant", "content": "turn 1"}]
    assert (first["advantage"], second["advantage"]) == (-0.5, 0.5) and first["tools"] == [{"name": "find"}]
    deep = next(r for r in rows if r["group"] == "a#9")
    assert [m["content"] for m in deep["prompt"]] == ["SYS", "user 0", "turn 2", "user 2", "turn 5", "user 5"] + [
        "turn 9",
        "user 9",
    ]


@st.composite
def random_trees(draw: st.DrawFn) -> Tree:
    n_goals = draw(st.integers(1, 3))
    spec: Spec = [(0, None, (), False)]
    for node_id in range(1, draw(st.integers(1, 14))):
        parent = draw(st.integers(0, node_id - 1))
        goals = tuple(draw(st.sets(st.integers(0, n_goals - 1), max_size=1)))
        spec.append((node_id, parent, goals, draw(st.booleans())))
    return build(spec, n_goals)


@settings(max_examples=60, deadline=None)
@given(random_trees())
def test_properties_on_random_trees(tree: Tree) -> None:
    best, mean = subtree_rewards(tree, "max"), subtree_rewards(tree, "mean")
    for node in tree.nodes:
        assert 0.0 <= mean[node.id] <= best[node.id] + 1e-12 <= 1.0 + 1e-12
    for group in sibling_groups(tree):
        assert abs(sum(group.advantages)) < 1e-6  # leave-one-out advantages of a group sum to zero
        assert group.informative == (len(set(group.rewards)) > 1)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=6))
def test_leave_one_out_is_each_reward_minus_the_others_mean(rewards: list[float]) -> None:
    for i, advantage in enumerate(leave_one_out(rewards)):
        others = rewards[:i] + rewards[i + 1 :]
        assert advantage == pytest.approx(rewards[i] - sum(others) / len(others))


def test_extract_command_writes_the_tree_format(tmp_path: Path) -> None:
    trees = tmp_path / "trees.jsonl"
    trees.write_text("".join(build(TWO_SEGMENTS, task_id=t).model_dump_json() + "\n" for t in "ab"))
    result = CliRunner().invoke(app, ["extract", str(tmp_path), "--format", "tree", "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "12 tree rows from 6 sibling groups of 2 trees (2 groups with equal rewards skipped)" in result.output
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["README.md", "extract_stats.json", "tree.jsonl"]
    stats = json.loads((tmp_path / "d" / "extract_stats.json").read_text())
    assert (stats["tree_groups"], stats["tree_zero_groups"], stats["tree_rows"]) == (8, 2, 12)
    assert stats["tokens"]["tree"] > 0 and stats["sft"] == 0
    rows = [json.loads(line) for line in (tmp_path / "d" / "tree.jsonl").read_text().splitlines()]
    assert [r["advantage"] for r in rows[:2]] == [-0.5, 0.5]
    out = tmp_path / "m"
    mean = CliRunner().invoke(
        app, ["extract", str(tmp_path), "--format", "tree", "--subtree", "mean", "--out", str(out)]
    )
    assert mean.exit_code == 0, mean.output
    assert [json.loads(line)["advantage"] for line in (out / "tree.jsonl").read_text().splitlines()[:2]] == [
        -0.25,
        0.25,
    ]
    bad = CliRunner().invoke(app, ["extract", str(tmp_path), "--format", "trees", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown format trees" in bad.output
