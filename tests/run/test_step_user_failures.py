"""A failing user simulator is the simulator's error, never the agent's (issue 13 item 5)."""

from __future__ import annotations

from josh.core.llm import LLMError
from josh.eval.evaluate import evaluate
from josh.harvest.extract import ExtractConfig, rejection
from josh.llm.scripted import ScriptedLLM
from josh.run.conversation import run_conversation
from josh.search.algorithm import SearchConfig, search
from josh.search.rollout import search_task
from josh.types import ErrorCategory
from josh.users.goal import GoalUser
from tests.fakes.conversation import CallingAgent, FakeEnv, make_tasks


def flaky_user_llm(fail_from: int) -> ScriptedLLM:
    """A user LLM that answers, then fails (after its retries) from the ``fail_from``-th call on."""
    calls = []

    def policy(messages, tools, index):
        calls.append(1)
        if len(calls) >= fail_from:
            raise LLMError("user-model: gave up after 6 attempts: RateLimitError")
        return "Please do the next step."

    return ScriptedLLM(policy)


async def test_conversation_ends_as_user_error_when_the_user_llm_fails():
    env, task = FakeEnv(), make_tasks(1, goals=3)[0]
    task.user_goal = "Get three things done."
    rec = await run_conversation(env, task, CallingAgent(), GoalUser(flaky_user_llm(fail_from=2)))
    assert rec.end_reason == "user_error"
    assert rec.errors == [ErrorCategory.USER_ERROR]
    assert "user simulator: LLM error" in rec.error and "RateLimitError" in rec.error
    assert rec.turns == 1 and rec.completed_goals == [0]


class RaisingUser:
    async def reply(self, task, transcript):
        raise RuntimeError("simulator bug")


async def test_a_raising_user_is_a_user_error_too():
    rec = await run_conversation(FakeEnv(), make_tasks(1)[0], CallingAgent(), RaisingUser())
    assert rec.end_reason == "user_error" and rec.errors == [ErrorCategory.USER_ERROR]
    assert "simulator bug" in rec.error


async def test_summary_counts_user_errors_outside_the_agents_error_shares(tmp_path):
    summary = await evaluate(FakeEnv(), make_tasks(4, goals=2), CallingAgent(), RaisingUser(), tmp_path)
    assert summary.end_reasons["user_error"] == 4
    assert summary.error_counts["user_error"] == summary.end_reasons["user_error"]
    assert summary.malformed_share == 0.0 and summary.bad_api_use_share == 0.0 and summary.failed == 0


async def test_a_user_whose_llm_failed_makes_a_failed_conversation_left_out_of_the_summary(tmp_path):
    tasks = make_tasks(4, goals=2)
    for task in tasks:
        task.user_goal = "Two things."
    summary = await evaluate(FakeEnv(), tasks, CallingAgent(), GoalUser(flaky_user_llm(fail_from=3)), tmp_path)
    assert summary.failed >= 1 and summary.conversations == 4 - summary.failed
    assert "user_error" not in summary.end_reasons and summary.malformed_share == 0.0


async def test_search_marks_the_branch_the_user_broke_with_user_error():
    task = make_tasks(1, goals=2)[0]
    task.user_goal = "Two things."
    tree = await search(task, FakeEnv(), CallingAgent(), GoalUser(flaky_user_llm(fail_from=2)))
    dead = [n for n in tree.nodes if n.dead]
    assert dead and all(n.errors == [ErrorCategory.USER_ERROR] for n in dead)
    assert all(n.exception.startswith("user simulator:") for n in dead)
    assert ErrorCategory.LLM_ERROR not in {e for n in tree.nodes for e in n.errors}
    # the user's LLM failed: the tree is no result and makes no training data; a user that fails otherwise does not
    # cost the agent its good turns on the ideal path
    tree.reward = 1.0
    assert tree.failed is None  # search() itself records; search_task marks the failure
    assert ErrorCategory.USER_ERROR not in ExtractConfig().drop_errors
    assert rejection(tree, ExtractConfig(min_reward=0.0)) is None
    assert rejection(tree.model_copy(update={"failed": "llm_error: x"}), ExtractConfig(min_reward=0.0)) == "llm_failed"


async def test_search_task_marks_a_tree_whose_user_llm_failed():
    task = make_tasks(1, goals=2)[0]
    task.user_goal = "Two things."
    tree = await search_task(task, FakeEnv(), CallingAgent(), GoalUser(flaky_user_llm(fail_from=2)), SearchConfig())
    assert tree.failed is not None and "RateLimitError" in tree.failed
