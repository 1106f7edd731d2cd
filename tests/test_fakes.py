"""The shared test fakes follow the protocols they stand in for, and the table agent names branches by path."""

from __future__ import annotations

from josh.core.agent import Agent
from josh.core.env import ConversationState, Env
from josh.core.user import UserSimulator
from tests.fakes.conversation import (
    Apologetic,
    CallingAgent,
    CountingUser,
    FakeEnv,
    TableAgent,
    TableUser,
    ToyEnv,
    make_task,
    path_of,
)


def test_fakes_follow_the_protocols() -> None:
    assert all(isinstance(agent, Agent) for agent in (TableAgent(), CallingAgent(), Apologetic()))
    assert isinstance(TableUser(), UserSimulator) and isinstance(CountingUser(), UserSimulator)
    assert isinstance(FakeEnv(), Env) and isinstance(ToyEnv(), Env)


async def test_table_agent_names_siblings_by_path() -> None:
    agent = TableAgent(goals={(1,): (0,)})
    turns = await agent.turn([], ConversationState(make_task()), n=2)
    assert [t.reply for t in turns] == ["reply 0", "reply 1"]
    assert [t.completed_goals for t in turns] == [[], [0]]
    assert path_of(turns[1].messages) == (1,)
