"""The LLM users with the environment's user tools (scripted backend): the tools go to the backend, the prompt
says what the device is for, calls come back natively or as ``<tool_call>`` text, and the customer sees its own
calls and their results."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from josh.core.llm import Completion
from josh.core.user import UserTurn
from josh.envs.taubench.tau2_user import Tau2ScriptedUser
from josh.llm.scripted import ScriptedLLM
from josh.types import Message, ToolCall, assistant, tool_result, user
from josh.users import ToolUser, make_user
from josh.users.device import device_calls, tool_names
from josh.users.goal import OPENING_CUE, customer_view
from tests.fakes.device import USER_TOOLS, phone_task


def _reply(kind: str, answer: str | Completion, tools: list[dict] | None = USER_TOOLS) -> tuple[UserTurn, ScriptedLLM]:
    llm = ScriptedLLM([answer])
    turn = asyncio.run(make_user(kind, llm, user_tools=tools).reply(phone_task(), [user("hi"), assistant("Hello!")]))
    return turn, llm


def test_goal_and_instruction_users_get_the_device_and_its_prompt() -> None:
    for kind in ("goal", "instruction"):
        turn, llm = _reply(kind, "Hello, my data is off.")
        assert turn == UserTurn(text="Hello, my data is off.", llm_calls=1, prompt_tokens=turn.prompt_tokens,
                                completion_tokens=turn.completion_tokens)  # fmt: skip
        request = llm.requests[0]
        assert request.tools == USER_TOOLS
        prompt = request.messages[0].content
        assert "toggle_data, set_apn" in prompt and "never both" in prompt and "never sees your tool calls" in prompt


def test_without_user_tools_nothing_changes() -> None:
    turn, llm = _reply("goal", '<tool_call>{"name": "toggle_data", "arguments": {}}</tool_call>', tools=None)
    assert llm.requests[0].tools is None and "How to use your phone" not in llm.requests[0].messages[0].content
    assert turn.tool_calls == [] and "toggle_data" in turn.text  # no device: the text is just what it said
    assert isinstance(make_user("tau2_scripted", user_tools=USER_TOOLS), Tau2ScriptedUser)  # rule-based: unchanged
    plain = make_user("goal", ScriptedLLM(["x"]))
    assert isinstance(plain, ToolUser) and plain.with_tools(USER_TOOLS) is not plain and plain.tools == []


def test_native_calls_and_text_calls_are_the_users_tool_step() -> None:
    native, _ = _reply(
        "goal", Completion(text="Let me see.", tool_calls=[ToolCall(name="set_apn", arguments={"apn": "x"})])
    )
    assert (
        native.text == ""
        and not native.done
        and [(c.name, c.arguments) for c in native.tool_calls] == [("set_apn", {"apn": "x"})]
    )
    text, _ = _reply("instruction", 'Sure.\n<tool_call>\n{"name": "toggle_data", "arguments": {}}\n</tool_call>')
    assert text.text == "" and [c.name for c in text.tool_calls] == ["toggle_data"] and text.llm_calls == 1
    broken, _ = _reply("goal", '<tool_call>{"name": "set_apn", "arguments": "internet"}</tool_call>')
    [call] = broken.tool_calls
    assert call.name == "set_apn" and isinstance(call.arguments, str)  # the runner answers it with an error


def test_the_customer_sees_its_calls_as_its_own_and_their_results() -> None:
    call = ToolCall(name="toggle_data")
    transcript = [user("hi"), assistant("Turn data on."), Message(role="user", tool_calls=(call,))]
    transcript += [tool_result(call.id, "Mobile data is now ON."), user("Done."), user("It works.")]
    view = customer_view(transcript)
    assert [(m.role, m.content) for m in view] == [
        ("user", OPENING_CUE),
        ("assistant", "hi"),
        ("user", "Turn data on."),
        ("assistant", None),
        ("tool", "Mobile data is now ON."),
        ("assistant", "Done.\nIt works."),
    ]
    assert view[3].tool_calls == (call,) and view[4].tool_call_id == call.id


def test_tool_names() -> None:
    assert tool_names(USER_TOOLS) == ["toggle_data", "set_apn"]


@given(st.text().filter(lambda t: "<tool_call>" not in t and not t.lstrip().lstrip("`").lstrip().startswith("{")))
def test_plain_text_is_never_a_call(text: str) -> None:
    assert device_calls(Completion(text=text)) == []
