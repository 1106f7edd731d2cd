"""The agent output readers: a table of real-looking good and bad outputs, plus property tests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.agents.act import parse_act
from josh.agents.function_calling import parse_tool_calls
from josh.agents.react import END_MARKER, parse_react, split_commands
from josh.core.parsing import read_call
from josh.types import ErrorCategory, ToolCall

MALFORMED = ErrorCategory.MALFORMED
CALL = '{"name": "search_hotel", "parameters": {"area": "north"}}'

# (output, expected calls as (name, args), expected reply, expected error)
REACT_TABLE = [
    (f"PLAN look it up {END_MARKER}\nAPICALL {CALL} {END_MARKER}", [("search_hotel", {"area": "north"})], None, None),
    (f"SPEAK Hello, how can I help? {END_MARKER}", [], "Hello, how can I help?", None),
    ("SPEAK: Hi there", [], "Hi there", None),
    (f"PLAN a {END_MARKER}SPEAK b {END_MARKER}", [], "b", None),
    (f"APICALL ```json\n{CALL}\n``` {END_MARKER}", [("search_hotel", {"area": "north"})], None, None),
    (
        f'APICALL {{"name": "book_train", "arguments": {{"people": "2"}}}} trailing words {END_MARKER}',
        [("book_train", {"people": "2"})],
        None,
        None,
    ),
    (f'APICALL {{"name": "x", "parameters": "{{\\"a\\": \\"1\\"}}"}} {END_MARKER}', [("x", {"a": "1"})], None, None),
    (f"SPEAK First line.\nSecond line. {END_MARKER}", [], "First line.\nSecond line.", None),
    (f"SPEAK We PLAN to SPEAK about APICALL limits. {END_MARKER}", [], "We PLAN to SPEAK about APICALL limits.", None),
    (f'SPEAK The SPEAKER said "PLAN ahead" {END_MARKER}', [], 'The SPEAKER said "PLAN ahead"', None),
    (
        f'APICALL {{"name": "n", "parameters": {{"q": "PLAN\\nSPEAK"}}}} {END_MARKER}',
        [("n", {"q": "PLAN\nSPEAK"})],
        None,
        None,
    ),
    ("", [], None, MALFORMED),
    ("I think the hotel is nice.", [], None, MALFORMED),
    (f"PLAN only thinking {END_MARKER}", [], None, MALFORMED),
    (f"SPEAK {END_MARKER}", [], None, MALFORMED),
    ('APICALL {"name": "search_hotel", "parameters": {"area": ', [("", None)], None, MALFORMED),
    ("APICALL {'name': 'search_hotel'}", [("", None)], None, MALFORMED),
    ('APICALL {"parameters": {}}', [("", None)], None, MALFORMED),
    ('APICALL {"name": "x", "parameters": [1, 2]}', [("x", None)], None, MALFORMED),
    ("APICALL search_hotel area=north", [("", None)], None, MALFORMED),
    ("PLAN " + "very long thought " * 2000, [], None, MALFORMED),
]


@pytest.mark.parametrize(("text", "calls", "reply", "error"), REACT_TABLE)
def test_react_table(text, calls, reply, error):
    parsed = parse_react(text)
    assert parsed.error == error
    assert parsed.reply == reply
    got = [(c.call.name, c.call.arguments if c.ok else None) for c in parsed.calls]
    assert got == calls
    if error is not None:
        assert parsed.problem


def test_react_drops_text_after_calls():
    text = f"PLAN p {END_MARKER}\nAPICALL {CALL} {END_MARKER}\nSPEAK Booked it! {END_MARKER}"
    parsed = parse_react(text)
    assert parsed.reply is None
    assert "SPEAK" not in parsed.text and parsed.text.endswith(END_MARKER)
    assert "Booked it!" in parsed.dropped


def test_react_runs_consecutive_calls_up_to_the_cap():
    text = "\n".join(f'APICALL {{"name": "t{i}", "parameters": {{}}}} {END_MARKER}' for i in range(5))
    parsed = parse_react(text, max_calls=2)
    assert [c.call.name for c in parsed.calls] == ["t0", "t1"]
    assert "t2" not in parsed.text


def test_react_stops_at_a_plan_between_calls():
    text = f"APICALL {CALL} {END_MARKER}\nPLAN now book {END_MARKER}\nAPICALL {CALL} {END_MARKER}"
    assert len(parse_react(text).calls) == 1


def test_react_speech_then_call_keeps_only_the_speech():
    parsed = parse_react(f"SPEAK One moment. {END_MARKER}\nAPICALL {CALL} {END_MARKER}")
    assert parsed.reply == "One moment." and not parsed.calls


def test_split_commands_ignores_keywords_mid_line():
    commands = split_commands("SPEAK I will PLAN it and SPEAK later\nPLAN next")
    assert [c.kind for c in commands] == ["SPEAK", "PLAN"]
    assert commands[0].body == "I will PLAN it and SPEAK later"


TOOL_TABLE = [
    (
        '<tool_call>\n{"name": "search_hotel", "arguments": {"area": "north"}}\n</tool_call>',
        [("search_hotel", {"area": "north"})],
        None,
        None,
    ),
    (
        'Let me check.\n<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b"}</tool_call>',
        [("a", {}), ("b", {})],
        None,
        None,
    ),
    ('{"name": "search_hotel", "parameters": {"area": "north"}}', [("search_hotel", {"area": "north"})], None, None),
    ('```json\n{"name": "x", "arguments": {"k": 1}}\n```', [("x", {"k": 1})], None, None),
    ("Sure, the hotel is in the north.", [], "Sure, the hotel is in the north.", None),
    ("", [], None, MALFORMED),
    ("   \n ", [], None, MALFORMED),
    ('<tool_call>\n{"name": "search_hotel", "arguments": {"area": ', [("", None)], None, MALFORMED),
    ('{"name": "x", "arguments": "not json"}', [("x", None)], None, MALFORMED),
    ("{garbage", [("", None)], None, MALFORMED),
]


def test_native_tool_calls_win_over_text_and_keep_their_ids():
    native = [ToolCall(name="a", arguments={"x": 1}, id="call_1"), ToolCall(name="b", arguments="{bad", id="call_2")]
    parsed = parse_tool_calls("thinking aloud", native)
    assert [c.call.id for c in parsed.calls] == ["call_1", "call_2"]
    assert parsed.calls[0].ok and not parsed.calls[1].ok
    assert parsed.error == MALFORMED


def test_tool_calls_capped():
    text = "".join(f'<tool_call>{{"name": "t{i}", "arguments": {{}}}}</tool_call>' for i in range(4))
    assert len(parse_tool_calls(text, max_calls=2).calls) == 2


ACT_TABLE = [
    (
        'Action: {"name": "search_hotel", "arguments": {"area": "north"}}',
        [("search_hotel", {"area": "north"})],
        None,
        None,
    ),
    ('Action: {"name": "respond", "arguments": {"content": "Hello!"}}', [], "Hello!", None),
    ('action:{"name": "respond", "arguments": {"content": "Hi"}} and more', [], "Hi", None),
    ('{"name": "get_order", "arguments": {"id": "#W1"}}', [("get_order", {"id": "#W1"})], None, None),
    ('Thought: hmm\nAction: {"name": "x", "arguments": {}}', [("x", {})], None, None),
    ("I will help you.", [], None, MALFORMED),
    ("", [], None, MALFORMED),
    ('Action: {"name": "respond", "arguments": {}}', [], None, MALFORMED),
    ('Action: {"name": "respond", "arguments": {"content": ', [("", None)], None, MALFORMED),
]


@pytest.mark.parametrize(
    ("parse", "text", "calls", "reply", "error"),
    [(parse_tool_calls, *row) for row in TOOL_TABLE] + [(parse_act, *row) for row in ACT_TABLE],
)
def test_parse_table(parse, text, calls, reply, error):
    """The function-calling and ACT parsers on their tables: calls (name, arguments or None if bad), reply, error."""
    parsed = parse(text)
    assert parsed.error == error
    assert parsed.reply == reply
    assert [(c.call.name, c.call.arguments if c.ok else None) for c in parsed.calls] == calls


def test_read_call_reports_the_end_of_the_object():
    read, end = read_call('  {"name": "a", "arguments": {}} tail')
    assert read.ok and '  {"name": "a", "arguments": {}} tail'[end:] == " tail"


def test_deep_nesting_is_malformed_not_a_crash():
    read, _ = read_call('{"name": "a", "arguments": ' + "[" * 100_000)
    assert not read.ok


json_scalars = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.none())
json_args = st.dictionaries(st.text(min_size=1, max_size=10), json_scalars, max_size=4)
names = st.from_regex(r"[a-z_]{1,15}", fullmatch=True)


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_readers_never_raise(text):
    for parsed in (parse_react(text), parse_tool_calls(text), parse_act(text)):
        assert parsed.has_action or parsed.error in (MALFORMED, ErrorCategory.UNSTORABLE)


@given(names, json_args, st.sampled_from(["arguments", "parameters"]))
def test_react_call_round_trip(name, args, key):
    parsed = parse_react(f"PLAN x {END_MARKER}\nAPICALL {json.dumps({'name': name, key: args})} {END_MARKER}")
    assert parsed.error is None
    assert [(c.call.name, c.call.arguments) for c in parsed.calls] == [(name, args)]


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="\r", blacklist_categories=("Cs",)), min_size=1, max_size=200
    ).filter(lambda s: s.strip() and END_MARKER not in s and not s.lstrip(" \t").startswith(":"))
)
def test_react_speech_round_trip(speech):
    parsed = parse_react(f"SPEAK {speech} {END_MARKER}")
    if any(line.lstrip(" \t").startswith(("PLAN", "APICALL", "SPEAK")) for line in speech.splitlines()):
        return
    assert parsed.reply == speech.strip()


@given(names, json_args, st.text(max_size=50))
def test_tool_call_block_round_trip(name, args, prefix):
    prefix = prefix.replace("<tool_call>", "")
    parsed = parse_tool_calls(f"{prefix}<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>")
    assert [(c.call.name, c.call.arguments) for c in parsed.calls] == [(name, args)]
