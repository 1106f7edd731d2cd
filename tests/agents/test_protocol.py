"""Agent protocols: every registered protocol writes what it reads (a new one is run in test_readme_extending.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from josh.agents import protocol_named
from josh.agents.prompting import examples
from josh.core.llm import Completion
from josh.core.parsing import unfence
from josh.types import ToolCall, assistant, tool_result, user

NAMES = ["act", "react", "function_calling"]
_WORDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(NAMES), reply=_WORDS, value=st.text(max_size=20))
@example(name="react", reply=":", value="")  # the reader drops a colon after SPEAK, so the writer must add one
@example(name="react", reply=" : no", value=":")
@example(name="react", reply="0", value="<COMMAND_END>")  # the marker inside a call's JSON is escaped
@example(name="function_calling", reply="{", value="")  # text opening with "{" is a call attempt, not a reply
def test_every_protocol_reads_back_what_it_writes(name: str, reply: str, value: str) -> None:
    protocol = protocol_named(name)
    call = ToolCall(name="find", arguments={"q": value})
    [text] = protocol.call_texts([call])
    parsed = protocol.parse(Completion(text=text))
    assert [(c.call.name, c.call.arguments) for c in parsed.calls] == [("find", {"q": value})]
    if "<COMMAND_END>" in reply or (name == "function_calling" and _reads_as_call(reply)):
        return
    assert protocol.parse(Completion(text=protocol.reply_text(reply))).reply == reply.strip()


def _reads_as_call(text: str) -> bool:
    return unfence(text).lstrip().startswith("{") or "<tool_call>" in text


def test_function_calling_reads_text_opening_with_a_brace_as_a_call_attempt() -> None:
    parsed = protocol_named("function_calling").parse(Completion(text="{"))
    assert parsed.reply is None and parsed.error is not None and "not valid JSON" in (parsed.problem or "")


@pytest.mark.parametrize("name", NAMES)
def test_rendered_conversations_show_every_result_to_its_call(name: str) -> None:
    protocol = protocol_named(name)
    call = ToolCall(id="c1", name="find", arguments={"q": "north"})
    canonical = [user("hi"), assistant(None, [call]), tool_result("c1", '{"ok": 1}'), assistant("Found it.")]
    rendered = protocol.render(canonical)
    steps = protocol.steps(rendered[1:], "Found it.")
    assert [s.kind for s in steps if s.kind != "text"] == ["call", "speak"]
    assert steps[0].name == "find" and json.loads(steps[0].result or "") == {"ok": 1}


def test_worked_examples_are_written_in_each_protocol() -> None:
    first = examples("toolwoz")[0]
    assert protocol_named("act").example(first).splitlines()[1].startswith('Action: {"name": "search_restaurant"')
    assert protocol_named("react").example(first).splitlines()[1] == f"PLAN {first.thought} <COMMAND_END>"
    assert protocol_named("function_calling").example(first).endswith(f"Agent: {first.reply}")


def test_results_that_span_lines_stay_with_their_call() -> None:
    react = protocol_named("react")
    results = react.result_texts("APIRETURN first\nsecond line\nAPIRETURN third")
    assert results == ["first\nsecond line", "third"]
    assert react.result_texts("Observation: x") is None
