"""JOSH search on table-driven agents and users whose tree is known exactly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from josh.core.llm import LLMError
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree, path_messages
from josh.types import ErrorCategory
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, label, make_task, path_of


def by_path(tree: Tree) -> dict[str, object]:
    """Nodes keyed by their branch path label ('' for the root), read from the reply each node carries."""
    out = {}
    for n in tree.nodes:
        out["" if n.parent is None else (label(path_of(n.messages)) if n.messages else f"dead@{n.parent}")] = n
    return out


async def run(agent, user=None, n_goals=2, **cfg):
    return await search(make_task(n_goals), FakeEnv(), agent, user or TableUser(), SearchConfig(**cfg))


async def test_ideal_path_pruning_and_counts() -> None:
    agent = TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})
    user = TableUser()
    tree = await run(agent, user)
    nodes = by_path(tree)
    assert tree.success and tree.reward == 1.0 and tree.max_reward == 1.0
    assert {p for p, n in nodes.items() if n.ideal} == {"", "1", "1.0", "1.0.1"}
    assert {p for p, n in nodes.items() if n.pruned} == {"0", "1.1", "1.0.0", "1.1.0", "1.1.1"}
    assert not any(n.partial or n.dead for n in tree.nodes)
    assert nodes["1"].goals == [0] and nodes["1.0.1"].goals == [1]
    assert agent.calls == [((), 2), ((1,), 2), ((1, 0), 2), ((1, 1), 2)]
    assert user.calls == [(), (1,), (1, 0), (1, 1)]
    assert tree.stats.nodes == 9 and tree.stats.llm_calls == 8 + 4
    assert tree.stats.prompt_tokens == 8 * 10 + 4 * 7
    assert [n.id for n in tree.ideal_path()] == [nodes[p].id for p in ("", "1", "1.0", "1.0.1")]


async def test_conversation_is_rebuilt_from_parents() -> None:
    tree = await run(TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)}))
    last = tree.ideal_path()[-1]
    msgs = path_messages(tree, last.id)
    assert msgs[0].role == "system" and msgs[0].content == "SYS"
    assert [m.content for m in msgs if m.role == "user"] == ["hello, I need help", "user 1", "user 1.0"]
    assert msgs[-1].content == "reply 1.0.1"
    assert all(len(n.messages) == 3 for n in tree.nodes if n.parent is not None)
    assert Tree.model_validate_json(tree.model_dump_json()) == tree


async def test_partial_credit_first_rewarded_leaf_wins_ties() -> None:
    tree = await run(TableAgent(goals={(0,): (0,), (1,): (1,), (0, 1): (1,)}))
    nodes = by_path(tree)
    assert nodes["0"].ideal and nodes["1"].partial and not nodes["1"].pruned
    assert nodes["0.1"].ideal and tree.success


async def test_most_goals_wins_and_multi_goal_turn_credits_all() -> None:
    tree = await run(TableAgent(goals={(0,): (0,), (1,): (0, 2)}), n_goals=3)
    nodes = by_path(tree)
    assert nodes["1"].ideal and nodes["1"].goals == [0, 2] and nodes["0"].partial
    assert tree.reward == pytest.approx(2 / 3)


async def test_partial_credit_marks_the_branch_leading_to_it() -> None:
    tree = await run(TableAgent(goals={(0, 0): (0,), (1, 1): (1,)}))
    nodes = by_path(tree)
    assert nodes["0.0"].ideal and nodes["0"].ideal
    assert nodes["1.1"].partial and nodes["1"].partial and not nodes["1"].pruned
    assert nodes["0.1"].pruned and nodes["1.0"].pruned


@pytest.mark.parametrize(
    ("branching", "beam", "widths", "ns"),
    [
        (2, 8, [2, 4, 8, 8, 8], [2, 2, 2, 1, 1]),
        (3, 8, [3, 3, 3, 3, 3], [3, 1, 1, 1, 1]),
        (3, 9, [3, 9, 9, 9, 9], [3, 3, 1, 1, 1]),
        (1, 8, [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]),
    ],
)
async def test_beam_limit(branching: int, beam: int, widths: list[int], ns: list[int]) -> None:
    agent = TableAgent()
    tree = await run(agent, max_beam=beam, branching=branching, max_depth=5)
    per_depth = [sum(1 for n in tree.nodes if n.depth == d) for d in range(1, 6)]
    assert per_depth == widths
    calls_per_depth, seen = [], 0
    for width in [1, *widths[:-1]]:
        calls_per_depth.append({n for _, n in agent.calls[seen : seen + width]})
        seen += width
    assert calls_per_depth == [{n} for n in ns]
    assert not tree.success and tree.reward == 0.0 and max(n.depth for n in tree.nodes) == 5


async def test_zero_goals_is_recorded_not_searched() -> None:
    agent = TableAgent()
    tree = await run(agent, n_goals=0)
    assert tree.error and "no goals" in tree.error and tree.nodes == [] and tree.reward == 0.0
    assert agent.calls == []


async def test_agent_that_raises_kills_only_its_leaf() -> None:
    agent = TableAgent(goals={(1, 0): (0,), (1, 0, 0): (1,)}, raises={(0,)})
    tree = await run(agent)
    dead = [n for n in tree.nodes if n.dead]
    assert len(dead) == 1 and "agent broke at 0" in dead[0].exception
    assert tree.nodes[dead[0].parent].messages[-1].content == "reply 0"
    assert dead[0].pruned and tree.success and tree.stats.errors == 1


async def test_backend_failure_is_an_llm_error() -> None:
    class Failing(TableAgent):
        async def turn(self, history, state, *, n=1):
            raise LLMError("server down")

    tree = await run(Failing())
    assert tree.nodes[1].dead and tree.nodes[1].errors == [ErrorCategory.LLM_ERROR]
    assert len(tree.nodes) == 2 and tree.reward == 0.0


async def test_user_that_fails_or_finishes_ends_the_branch() -> None:
    user = TableUser(raises={(0,)}, done={(1,)})
    tree = await run(TableAgent(), user, max_depth=4)
    nodes = by_path(tree)
    assert nodes["0"].dead and "user broke" in nodes["0"].exception
    assert nodes["1"].ended and nodes["1"].user_done
    assert len(tree.nodes) == 3


async def test_user_that_gives_up_is_a_dead_leaf() -> None:
    tree = await run(TableAgent(), TableUser(gives_up={(1,)}), max_depth=2)
    nodes = by_path(tree)
    assert nodes["1"].dead and "user LLM failed" in nodes["1"].exception and nodes["1"].user is None
    assert {p for p in nodes if p.startswith("1.")} == set() and tree.stats.errors == 1


async def test_user_that_never_ends_stops_at_max_depth() -> None:
    agent = TableAgent()
    tree = await run(agent, max_depth=3, max_beam=2)
    assert max(n.depth for n in tree.nodes) == 3 and len(agent.calls) == 1 + 2 + 2


async def test_terminated_env_ends_leaf_and_reward_still_counts() -> None:
    tree = await run(TableAgent(goals={(0,): (0,)}, ends={(0,)}))
    nodes = by_path(tree)
    assert nodes["0"].ideal and nodes["0"].ended and tree.reward == 0.5
    assert len(tree.nodes) == 3


async def test_tie_prefers_a_branch_that_goes_on() -> None:
    tree = await run(TableAgent(goals={(0,): (0,), (1,): (0,)}, ends={(0,)}))
    nodes = by_path(tree)
    assert nodes["1"].ideal and nodes["0"].partial


async def test_leaves_run_concurrently() -> None:
    agent = TableAgent(delay=0.01)
    await run(agent, max_depth=4)
    assert agent.peak == 8


async def test_node_ids_follow_leaf_order_not_which_turn_came_back_first() -> None:
    tree = await run(TableAgent(slow={(0,)}), max_depth=2)
    assert [n.id for n in by_path(tree).values()] == list(range(7))
    assert list(by_path(tree)) == ["", "0", "1", "0.0", "0.1", "1.0", "1.1"]


async def test_opening_user_done_means_no_agent_turn() -> None:
    agent = TableAgent()
    tree = await run(agent, TableUser(done={()}))
    assert agent.calls == [] and tree.nodes[0].ended and len(tree.nodes) == 1


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValidationError):
        SearchConfig(branching=0)
