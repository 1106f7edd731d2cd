import json

from hypothesis import given
from hypothesis import strategies as st

from josh.types import Goal, Message, Task, ToolCall, assistant, tool_result, user

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


@given(st.text(max_size=40), st.dictionaries(st.text(max_size=10), json_values, max_size=4))
def test_message_with_calls_round_trips(text, args):
    msg = assistant(text, [ToolCall(name="search_hotel", arguments=args)])
    assert Message.model_validate_json(msg.model_dump_json()) == msg
    assert Message.from_openai(json.loads(json.dumps(msg.to_openai()))) == msg


def test_openai_arguments_are_json_strings_and_bad_json_is_kept_raw():
    call = ToolCall(name="book_train", arguments={"people": "3"})
    assert call.to_openai()["function"]["arguments"] == '{"people": "3"}'
    raw = ToolCall.from_openai({"id": "c1", "function": {"name": "x", "arguments": '{"a": '}})
    assert raw.arguments == '{"a": '
    listy = ToolCall.from_openai({"id": "c2", "function": {"name": "x", "arguments": "[1, 2]"}})
    assert listy.arguments == "[1, 2]"


def test_task_round_trips():
    task = Task(
        id="MUL0001.json",
        env="toolwoz",
        user_goal="Find a cheap hotel.",
        goals=[Goal(name="search_hotel", parameters={"pricerange": "cheap"})],
        details={"domains": ["hotel"]},
        transcript=[user("hi"), assistant("hello"), tool_result("c1", "[]")],
    )
    assert Task.model_validate_json(task.model_dump_json()) == task
