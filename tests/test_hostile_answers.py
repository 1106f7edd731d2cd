"""Hostile model answers stay data: every parser of model output (the agents' protocols, the LLM users, the judge and
the arena) turns any answer into a parsed value or its own counted failure, never an exception. Non-finite numbers,
1e400, huge integers, 10k-deep nesting and thousands of braces included (issue 48 item 3)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.agents import protocols
from josh.core.llm import Completion
from josh.core.user import UserTurn
from josh.eval.judge.arena import parse_verdict
from josh.eval.judge.parse import JudgeOutputError, parse_judgement
from josh.eval.judge.rubric import DIMENSIONS
from josh.llm.scripted import ScriptedLLM
from josh.types import Task, ToolCall, assistant, user
from josh.users import make_user
from tests.fakes.device import USER_TOOLS, phone_task

# Fragments a model (or an attacker behind it) may write where a value belongs.
VALUES = (
    "Infinity",
    "-Infinity",
    "NaN",
    "1e400",
    "-1e400",
    "1e-400",
    "9" * 5000,
    '"' + "9" * 5000 + '"',
    '"inf"',
    '"nan"',
    "[" * 10_000,
    "[" * 10_000 + "]" * 10_000,
    '{"a":' * 10_000,
    "{" * 5000,
    "}" * 5000,
    "{}" * 5000,
    '{"score": NaN}',
    '{"score": 1e400, "why": "x"}',
    "true",
    "null",
    '"\\ud800"',
)
# Places a value can sit in the answers each parser reads.
FRAMES = (
    "{v}",
    '{{"cohesion": {v}, "correctness": {v}, "helpfulness": {v}, "policy": {v}}}',
    '{{"winner": {v}, "why": {v}}}',
    'APICALL {{"name": "find", "arguments": {v}}}',
    'APICALL {{"name": {v}, "parameters": {{"x": {v}}}}}',
    "PLAN think\nSPEAK {v}",
    'Action: {{"name": "respond", "arguments": {{"content": {v}}}}}',
    '<tool_call>{{"name": "toggle_data", "arguments": {v}}}</tool_call>',
    '```json\n{{"name": "set_apn", "arguments": {{"apn": {v}}}}}\n```',
)

hostile = st.one_of(
    st.builds(lambda frame, value: frame.format(v=value), st.sampled_from(FRAMES), st.sampled_from(VALUES)),
    st.builds(lambda a, b: a + b, st.sampled_from(VALUES), st.sampled_from(VALUES)),
    st.text(alphabet='{}[]":,0123456789eE.-+ INfinityaN', max_size=300),
    st.text(max_size=200),
)
hostile_native = st.builds(
    lambda name, args: ToolCall(name=name, arguments=args), st.sampled_from(["find", ""]), hostile
)


@given(hostile, st.lists(hostile_native, max_size=2))
@settings(max_examples=200, deadline=None)
def test_agent_protocols_parse_any_answer(text: str, native: list[ToolCall]) -> None:
    for protocol in protocols():
        parsed = protocol.parse(Completion(text=text, tool_calls=native))
        assert parsed.has_action or parsed.error is not None


@given(hostile)
@settings(max_examples=200, deadline=None)
def test_the_judge_and_the_arena_read_any_answer_or_fail_their_own_way(text: str) -> None:
    try:
        scores, _ = parse_judgement(text, list(DIMENSIONS))
    except JudgeOutputError:
        pass
    else:
        assert all(isinstance(s, int) and 1 <= s <= 5 for s in scores.values())
    try:
        verdict, _ = parse_verdict(text)
    except JudgeOutputError:
        pass
    else:
        assert verdict


def test_non_finite_and_huge_scores_are_judge_output_errors() -> None:
    for value in ("Infinity", "-Infinity", "NaN", "1e400", '"inf"', '"nan"', '{"score": NaN}', "9" * 5000):
        answer = "{" + ", ".join(f'"{name}": {value}' for name in DIMENSIONS) + "}"
        try:
            parse_judgement(answer, list(DIMENSIONS))
        except JudgeOutputError:
            continue
        raise AssertionError(f"{value[:20]} was accepted as a score")


def test_thousands_of_braces_are_judge_output_errors() -> None:
    """Nesting far past the recursion limit is refused as a judge output error, not a RecursionError."""
    for text in ('{"a":' * 10_000, "{" * 20_000, "[" * 10_000 + "{" * 10_000):
        for parse in (lambda t: parse_judgement(t, list(DIMENSIONS)), parse_verdict):
            with pytest.raises(JudgeOutputError):
                parse(text)


def _guide_task() -> Task:
    return phone_task().model_copy(update={"transcript": [user("My phone is broken."), assistant("Let me help.")]})


@given(hostile, st.lists(hostile_native, max_size=2))
@settings(max_examples=100, deadline=None)
def test_llm_users_turn_any_answer_into_a_turn(text: str, native: list[ToolCall]) -> None:
    for kind, tools, task in (
        ("goal", None, phone_task()),
        ("goal", USER_TOOLS, phone_task()),
        ("instruction", USER_TOOLS, phone_task()),
        ("guide", None, _guide_task()),
    ):
        llm = ScriptedLLM([Completion(text=text, tool_calls=native)])
        turn = asyncio.run(make_user(kind, llm, user_tools=tools).reply(task, [user("hi"), assistant("Hello!")]))
        assert isinstance(turn, UserTurn)
