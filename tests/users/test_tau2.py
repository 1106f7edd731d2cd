"""The scripted τ² user: opening line, the user-side gold calls once the agent has spoken, then retail_scripted's
talk; registered for tau2-* envs only; a user that calls tools where the env has none fails as data."""

from __future__ import annotations

import asyncio

import pytest

from josh.envs.taubench.tau2_user import DID, Tau2ScriptedUser
from josh.run.conversation import run_conversation
from josh.types import Message, Task, assistant, tool_result, user
from josh.users import USERS, make_user
from tests.fakes.conversation import CallingAgent, FakeEnv, make_task

ACTIONS = [{"name": "toggle_airplane_mode", "kwargs": {}}, {"name": "set_apn", "kwargs": {"apn": "internet"}}]


def _task(actions: list[dict] = ACTIONS) -> Task:
    return Task(
        id="tau2-telecom-x",
        env="tau2-telecom",
        details={"instruction": "Your phone has no data. You want to fix it.", "user_actions": actions},
    )


def _reply(transcript: list[Message], task: Task | None = None) -> object:
    return asyncio.run(Tau2ScriptedUser().reply(task or _task(), transcript))


def test_opens_then_makes_every_user_call_once_then_talks_like_retail_scripted() -> None:
    opening = _reply([])
    assert opening.text == "Hi! I want to fix it." and not opening.tool_calls and not opening.done
    agent = assistant("Please turn airplane mode off and set the APN.")
    acted = _reply([user(opening.text), agent])
    assert acted.text == DID and not acted.done
    assert [(c.name, c.arguments) for c in acted.tool_calls] == [(a["name"], a["kwargs"]) for a in ACTIONS]
    assert len({c.id for c in acted.tool_calls}) == 2
    made = [Message(role="user", tool_calls=tuple(acted.tool_calls))]
    made += [tool_result(c.id, "ok") for c in acted.tool_calls]
    after = [user(opening.text), agent, *made, user(DID)]
    asked = _reply([*after, assistant("Is it working now?")])
    assert asked.text == "yes" and not asked.tool_calls
    stopped = _reply([*after, assistant("Your data works again.")])
    assert stopped.done and not stopped.tool_calls
    partly = _reply([user(opening.text), agent, Message(role="user", tool_calls=acted.tool_calls[:1])])
    assert [c.name for c in partly.tool_calls] == ["set_apn"]


def test_without_user_actions_it_is_retail_scripted() -> None:
    task = _task([])
    assert _reply([user("Hi"), assistant("Done.")], task).done
    assert _reply([user("Hi"), assistant("Anything else?")], task).text == "yes"


def test_registered_for_tau2_envs_only() -> None:
    assert isinstance(make_user("tau2_scripted", did="Ok."), Tau2ScriptedUser)
    for env in ("tau2-airline", "tau2-retail", "tau2-telecom"):
        USERS.check("tau2_scripted", env=env)
    with pytest.raises(ValueError, match="runs on tau2-airline, tau2-retail, tau2-telecom only, not on environment"):
        USERS.check("tau2_scripted", env="toolwoz")


def test_user_calls_where_the_env_has_no_user_tools_end_as_a_user_error() -> None:
    task = make_task().model_copy(update={"details": _task().details})
    record = asyncio.run(run_conversation(FakeEnv(), task, CallingAgent(), Tau2ScriptedUser()))
    assert record.end_reason == "user_error" and record.error is not None
    assert "fake has no user tools, but the user called toggle_airplane_mode" in record.error
    assert record.errors == ["user_error"]
