"""The gold-replay agent (environment-agnostic) and the scripted retail user."""

from __future__ import annotations

from typing import Any

import pytest

from josh.agents.replay import DONE_REPLY, ReplayAgent, final_reply, gold_calls
from josh.core.agent import Agent
from josh.core.env import ConversationState
from josh.core.user import UserSimulator
from josh.envs.taubench.user import STOP, TauScriptedUser, opening_line
from josh.types import Goal, Message, Task, ToolCall, ToolResult, assistant, user


class CounterEnv:
    """A minimal env: ``add`` counts on the state's log; ``quit`` ends the conversation."""

    name = "counter"
    tools: list[dict[str, Any]] = []

    def call(self, state: ConversationState, call: ToolCall) -> ToolResult:
        if call.name == "quit":
            state.terminated = True
            return ToolResult(content="bye", terminal=True)
        state.log.append(call)  # type: ignore[arg-type]
        return ToolResult(content=f"count={len(state.log)}")


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n, arguments={}, id=f"c{i}") for i, n in enumerate(names)]


async def test_replay_agent_makes_calls_on_forks() -> None:
    agent = ReplayAgent(CounterEnv(), calls("add", "add"), reply="done")
    assert isinstance(agent, Agent)
    state = ConversationState(Task(env="test", id="t"))
    turns = await agent.turn([], state, n=3)
    assert len(turns) == 3 and state.log == []
    for turn in turns:
        assert [m.role for m in turn.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]
        assert turn.messages[1].tool_call_id == "c0" and turn.messages[3].content == "count=2"
        assert turn.reply == "done" and len(turn.state.log) == 2
    assert len({id(t.state) for t in turns}) == 3


async def test_replay_agent_batches_and_resumes_from_history() -> None:
    agent = ReplayAgent(CounterEnv(), calls("add", "add", "add"), calls_per_turn=2)
    state = ConversationState(Task(env="test", id="t"))
    first = (await agent.turn([], state))[0]
    assert first.reply is not None and "Do you confirm" in first.reply and len(first.state.log) == 2
    second = (await agent.turn([user("hi"), *first.messages, user("yes")], first.state))[0]
    assert len(second.state.log) == 3 and second.reply == DONE_REPLY
    with pytest.raises(ValueError):
        ReplayAgent(CounterEnv(), [], calls_per_turn=0)


async def test_replay_agent_stops_when_the_env_terminates() -> None:
    turn = (
        await ReplayAgent(CounterEnv(), calls("add", "quit", "add")).turn(
            [], ConversationState(Task(env="test", id="t"))
        )
    )[0]
    assert turn.terminated and turn.reply is None and len(turn.state.log) == 1
    assert turn.messages[-1].role == "tool"


def test_gold_calls_from_actions_or_goals() -> None:
    retail = Task(
        id="r", env="retail", details={"actions": [{"name": "think", "kwargs": {"thought": "x"}}], "outputs": ["42"]}
    )
    assert gold_calls(retail) == [ToolCall(name="think", arguments={"thought": "x"}, id="gold_0")]
    assert "42" in final_reply(retail)
    toolwoz = Task(env="toolwoz", id="w", goals=[Goal(name="book_hotel", parameters={"name": "acorn"})])
    assert gold_calls(toolwoz)[0].arguments == {"name": "acorn"}
    assert final_reply(toolwoz).endswith(".")


async def test_scripted_user_rules() -> None:
    task = Task(
        id="t",
        env="retail",
        details={"instruction": "Your name is Ann Lee. You want to cancel order #W1234567. Be terse."},
    )
    simulator = TauScriptedUser(max_turns=3)
    assert isinstance(simulator, UserSimulator)
    first = await simulator.reply(task, [])
    assert first.text == "Hi! I want to cancel order #W1234567." and not first.done
    history: list[Message] = [user(first.text), assistant("Shall I cancel it?")]
    assert (await simulator.reply(task, history)).text == "yes"
    done = await simulator.reply(task, [*history, user("yes"), assistant("It is cancelled.")])
    assert (done.text, done.done) == (STOP, True)
    asked = [*history, user("yes"), assistant("Anything else?"), user("yes"), assistant("Really?")]
    assert (await simulator.reply(task, asked)).done
    assert opening_line(Task(env="retail", id="empty")) == "Hi! I need help with my order."


async def test_replay_agent_without_calls_replays_each_tasks_gold_calls() -> None:
    task = Task(
        id="g",
        env="test",
        details={"actions": [{"name": "add", "kwargs": {}}, {"name": "add", "kwargs": {}}], "outputs": ["7"]},
    )
    turn = (await ReplayAgent(CounterEnv()).turn([], ConversationState(task)))[0]
    assert [r.name for r in turn.state.log] == ["add", "add"] and "7" in turn.reply
