"""Agent protocols: every registered protocol writes what it reads, and a new one is a class plus one registration."""

from __future__ import annotations

import json
import re
from string import Template

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import josh.agents
from josh.agents import agent_prompt, make_agent, protocol_named, protocols, register_protocol
from josh.agents.parsing import Parsed, malformed, read_call
from josh.agents.prompting import examples
from josh.agents.protocol import AgentProtocol
from josh.llm.base import Completion
from josh.llm.scripted import ScriptedLLM
from josh.types import ToolCall, assistant, tool_result, user
from tests.fakes import ToyEnv

NAMES = ["act", "react", "function_calling"]
_WORDS = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(NAMES), reply=_WORDS, value=st.text(max_size=20))
def test_every_protocol_reads_back_what_it_writes(name: str, reply: str, value: str) -> None:
    protocol = protocol_named(name)
    call = ToolCall(name="find", arguments={"q": value})
    [text] = protocol.call_texts([call])
    parsed = protocol.parse(Completion(text=text))
    assert [(c.call.name, c.call.arguments) for c in parsed.calls] == [("find", {"q": value})]
    if "<COMMAND_END>" not in reply:
        assert protocol.parse(Completion(text=protocol.reply_text(reply))).reply == reply.strip()


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


class Tagged(AgentProtocol):
    """A made-up protocol: ``<call>{json}</call>`` to act, ``<say>...</say>`` to speak, ``RESULT`` lines back."""

    name = "tagged"
    result_prefix = "RESULT"

    def parse(self, completion: Completion, *, max_calls: int = 3) -> Parsed:
        if match := re.search(r"<say>(.*?)</say>", completion.text, re.DOTALL):
            return Parsed(match.group(0), reply=match.group(1).strip())
        calls = [read_call(body)[0] for body in re.findall(r"<call>(.*?)</call>", completion.text, re.DOTALL)]
        if not calls:
            return malformed(completion.text, "write <call>{...}</call> or <say>...</say>")
        return Parsed(completion.text.strip(), tuple(calls[:max_calls]))

    def call_texts(self, calls: list[ToolCall]) -> list[str]:
        return ["".join(f"<call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</call>" for c in calls)]

    def reply_text(self, reply: str) -> str:
        return f"<say>{reply}</say>"

    def template(self) -> Template:
        return Template("Act with <call>{json}</call>, speak with <say>words</say>.\n$tools\n\n$domain\n\n$examples")


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made in a test are undone after it."""
    monkeypatch.setattr(josh.agents.AGENTS, "_entries", dict(josh.agents.AGENTS._entries))
    monkeypatch.setattr(josh.agents, "_PROTOCOLS", dict(josh.agents._PROTOCOLS))


async def test_a_new_protocol_is_one_class_and_one_registration(registry: None) -> None:
    register_protocol(Tagged())
    env = ToyEnv()
    llm = ScriptedLLM(['<call>{"name": "find", "arguments": {}}</call>', "<say>Found it.</say>"])
    agent = make_agent("tagged", env, llm, examples=1)
    task = env.tasks("test")[0]
    assert "Customer:" in agent.system_prompt(task) and "find()" in agent.system_prompt(task)
    state = env.reset(task)
    [turn] = await agent.turn([user("find it")], state)
    assert turn.reply == "Found it." and turn.messages[1].content.startswith("RESULT")
    steps = protocol_named("tagged").steps(turn.messages, turn.reply)
    assert [s.kind for s in steps] == ["call", "speak"] and steps[0].name == "find"
    assert json.loads(steps[0].result or "") == {"ok": "find"}
    rows = agent_prompt("tagged", env).render([user("hi"), assistant("Hello.")])
    assert rows[-1].content == "<say>Hello.</say>"
    assert "tagged" in [p.name for p in protocols()]
