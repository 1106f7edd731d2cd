"""Hostile model output (lone surrogates, deep nesting, huge numbers) never stops a run and is always storable."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.agents import make_agent
from josh.agents.act import parse_act
from josh.agents.function_calling import parse_tool_calls
from josh.agents.react import parse_react
from josh.core.llm import Completion
from josh.core.parsing import read_call
from josh.envs.toolwoz.agenda import AgendaUser
from josh.eval.evaluate import evaluate, load_results
from josh.llm.scripted import ScriptedLLM
from josh.run.components import build_env
from josh.search.tree import Node, Tree
from josh.types import ErrorCategory, Message, ToolCall, assistant
from josh.util.jsonl import JsonlWriter, iter_jsonl
from josh.util.storable import MAX_DEPTH, clean_text, json_problem, to_storable

SURROGATE_CALL = '{"name": "search_hotel", "arguments": {"area": "north", "name": "caf\\ud800"}}'
HUGE = "9" * 5000
DEEP = '{"name": "search_hotel", "arguments": {"a": ' + "[" * 300 + "]" * 300 + "}}"
WRAPS = {
    "react": lambda call: f"APICALL {call} <COMMAND_END>",
    "act": lambda call: f"Action: {call}",
    "function_calling": lambda call: f"<tool_call>{call}</tool_call>",
}
READERS = {"react": parse_react, "act": parse_act, "function_calling": parse_tool_calls}


def storable(parsed) -> str:
    """The record an agent would store for one parsed output, as JSON (raises when it cannot be stored)."""
    calls = [c.call for c in parsed.calls]
    message = assistant(parsed.reply or parsed.text or None, calls)
    return Message.model_validate_json(message.model_dump_json()).model_dump_json()


@pytest.mark.parametrize("protocol", sorted(READERS))
@pytest.mark.parametrize(
    ("call", "category"),
    [
        (SURROGATE_CALL, ErrorCategory.UNSTORABLE),
        (DEEP, ErrorCategory.UNSTORABLE),
        ('{"name": "search_hotel", "arguments": {"stars": ' + HUGE + "}}", ErrorCategory.MALFORMED),
        ('{"name": "search_hotel", "arguments": {"stars": NaN}}', ErrorCategory.MALFORMED),
        ('{"name": "search_hotel", "arguments": ' + "[" * 5000, ErrorCategory.UNSTORABLE),
    ],
)
def test_every_reader_refuses_unstorable_calls_with_a_category(protocol, call, category):
    parsed = READERS[protocol](WRAPS[protocol](call))
    assert parsed.error == category and parsed.problem
    assert [c.error for c in parsed.calls if not c.ok] == [category]
    storable(parsed)


def test_lone_surrogates_in_text_are_repaired_and_flagged():
    for reader in (parse_react, parse_tool_calls, parse_act):
        parsed = reader("SPEAK caf\ud800 ok <COMMAND_END>")
        assert parsed.repaired
        assert "\ud800" not in storable(parsed)
    reply = parse_react("SPEAK caf\ud800 <COMMAND_END>")
    assert reply.reply == "caf\ufffd" and reply.error is None
    assert clean_text("a\ud83d\ude00b") == "a\U0001f600b"  # a split pair is joined, not replaced


def test_native_calls_from_a_server_never_raise():
    deep = '{"a": ' + "[" * 3000 + "]" * 3000 + "}"
    for args in (deep, '{"n": ' + HUGE + "}", '{"x": "\\udfff"}', '{"a": Infinity}', 5, None, ["a"]):
        call = ToolCall.from_openai({"id": "c", "function": {"name": "search_hotel", "arguments": args}})
        assert isinstance(call.arguments, str)
        parsed = parse_tool_calls("", [call])
        assert parsed.error == ErrorCategory.MALFORMED
        storable(parsed)
    nested = {"a": json.loads("[" * 100 + "]" * 100)}
    parsed = parse_tool_calls("", [ToolCall(name="search_hotel", arguments=nested)])
    assert parsed.error == ErrorCategory.UNSTORABLE
    storable(parsed)
    odd = ToolCall.from_openai({"id": None, "function": {"name": None, "arguments": "{}"}})
    assert odd.name == "" and odd.id.startswith("call_")


TOKENS = st.sampled_from(
    ["APICALL ", "SPEAK ", "PLAN ", "<COMMAND_END>", "Action: ", "<tool_call>", "</tool_call>", "```json\n", "\n"]
    + ['{"name": "search_hotel", "arguments": ', '{"a": ', "[", "]", "}", '"', ",", ": ", "\\ud800", "\\udc00"]
    + ["1" * 4400, "NaN", "-Infinity", "null", "\x00", "\ud800", "\udfff", "é", "\U0001f600"]
)
HOSTILE = st.lists(st.one_of(TOKENS, st.text(max_size=5)), max_size=60).map("".join)


@given(HOSTILE)
@settings(max_examples=400, deadline=None)
def test_readers_never_raise_and_always_give_storable_output(text):
    for reader in (parse_react, parse_tool_calls, parse_act):
        parsed = reader(text)
        assert parsed.has_action or parsed.error in (ErrorCategory.MALFORMED, ErrorCategory.UNSTORABLE)
        storable(parsed)


def test_read_call_depth_limit_is_the_documented_one():
    ok = '{"name": "a", "arguments": ' + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}"
    too_deep = '{"name": "a", "arguments": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    assert not read_call(ok)[0].ok and read_call(ok)[0].error == ErrorCategory.MALFORMED  # a list, not an object
    assert read_call(too_deep)[0].error == ErrorCategory.UNSTORABLE
    assert json_problem(json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))) is None


def test_writer_repairs_what_cannot_be_serialised_and_keeps_the_line(tmp_path):
    deep: dict = {}
    cursor = deep
    for _ in range(400):
        cursor["a"] = {}
        cursor = cursor["a"]
    tree = Tree(task_id="t\ud800", nodes=[Node(id=0, user="hi\udc00", exception="x\ud800")])
    tree.config = {"deep": deep}
    path = tmp_path / "trees.jsonl"
    with JsonlWriter(path) as writer:
        writer.write(tree)
        writer.write({"a": float("nan"), "b": "\ud800"})
        writer.write({"fine": 1})
        assert writer.repaired == 2
    records = list(iter_jsonl(path))
    assert len(records) == 3
    read_back = Tree.model_validate(records[0])
    assert read_back.task_id == "t\ufffd" and read_back.nodes[0].user == "hi\ufffd"
    assert records[1] == {"a": None, "b": "\ufffd"}
    assert to_storable(10**5000).startswith("<integer of")


async def test_eval_with_surrogate_calls_finishes_and_counts_them(tmp_path):
    """Issue 13 item 1: this command exited with code 2 and lost the run."""
    env = build_env("toolwoz", "mini")
    tasks = env.tasks("test")[:3]
    llm = ScriptedLLM([f"<tool_call>{SURROGATE_CALL}</tool_call>", "Here you go: caf\ud800."])
    agent = make_agent("function_calling", env, llm)
    summary = await evaluate(env, tasks, agent, AgendaUser(), tmp_path, max_turns=3)
    records = load_results(tmp_path)
    assert len(records) == 3 and summary.conversations == 3
    assert all(ErrorCategory.UNSTORABLE in r.errors for r in records)
    assert summary.malformed_share == 1.0 and summary.error_counts["unstorable"] >= 3
    assert all(r.end_reason != "agent_error" for r in records)


async def test_eval_with_huge_numbers_counts_malformed_output_not_agent_errors(tmp_path):
    """Issue 13 item 2: a 5,000-digit number ended conversations as agent_error while malformed output read 0%."""
    env = build_env("toolwoz", "mini")
    reply = '<tool_call>{"name": "search_hotel", "arguments": {"stars": ' + HUGE + "}}</tool_call>"
    native = Completion(tool_calls=[ToolCall.from_openai({"id": "c", "function": {"name": "x", "arguments": DEEP}})])
    agent = make_agent("function_calling", env, ScriptedLLM([reply, native]))
    summary = await evaluate(env, env.tasks("test")[:2], agent, AgendaUser(), tmp_path, max_turns=2)
    assert summary.end_reasons.get("agent_error", 0) == 0
    assert summary.malformed_share == 1.0


def test_react_reads_at_most_max_commands():
    from josh.agents.react import MAX_COMMANDS

    within = "\n".join(["PLAN think"] * (MAX_COMMANDS - 1) + ["SPEAK hello"])
    beyond = "\n".join(["PLAN think"] * MAX_COMMANDS + ["SPEAK hello"])
    assert parse_react(within).reply == "hello"
    assert parse_react(beyond).error == ErrorCategory.MALFORMED
