"""One conversation step for evaluation and search: a failing agent or user is recorded the same way in both."""

from __future__ import annotations

import pytest

from josh.core.llm import LLMError
from josh.run.conversation import run_conversation
from josh.run.step import agent_step, user_step
from josh.search.algorithm import SearchConfig, search
from josh.types import ErrorCategory
from tests.fakes.conversation import CallingAgent, CountingUser, FakeEnv, make_task


class DownAgent(CallingAgent):
    async def turn(self, history, state, *, n=1):
        raise LLMError("server down")


class Empty(CallingAgent):
    async def turn(self, history, state, *, n=1):
        return []


class GivingUp(CountingUser):
    async def reply(self, task, transcript):
        said = await super().reply(task, transcript)
        return said.model_copy(update={"error": "LLM error: rate limited", "llm_calls": 1})


async def test_agent_failures_are_one_line_with_their_category() -> None:
    state = FakeEnv().reset(make_task())
    down = await agent_step(DownAgent(), [], state)
    assert down.failure == "LLMError: server down" and down.errors == [ErrorCategory.LLM_ERROR] and not down.turns
    empty = await agent_step(Empty(), [], state)
    assert empty.failure == "agent returned no turns" and empty.errors == []
    fine = await agent_step(CallingAgent(), [], state, n=2)
    assert fine.failure is None and len(fine.turns) == 2


async def test_user_failures_keep_the_accounting_and_say_who_failed() -> None:
    task = make_task()
    answer = await user_step(GivingUp(), task, [])
    assert answer.failure == "user simulator: LLM error: rate limited" and answer.said.llm_calls == 1
    assert answer.ended and answer.errors == [ErrorCategory.USER_ERROR]
    assert not (await user_step(CountingUser(), task, [])).ended


@pytest.mark.parametrize(("agent", "user"), [(DownAgent(), CountingUser()), (CallingAgent(), GivingUp())])
async def test_evaluation_and_search_record_a_failure_alike(agent, user) -> None:
    task = make_task()
    record = await run_conversation(FakeEnv(), task, agent, user)
    tree = await search(task, FakeEnv(), agent, user, SearchConfig(max_depth=2))
    dead = [n for n in tree.nodes if n.dead]
    assert dead and {n.exception for n in dead} == {record.error}
    assert set(record.errors) == {e for n in dead for e in n.errors}
