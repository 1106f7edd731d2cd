"""The agenda user reads hostile agent replies in linear time and with the same rules as before (issue 13 item 3)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.envs.toolwoz.agenda import READ_LIMIT, AgendaUser, asked_slots, gives_reference
from josh.envs.toolwoz.agenda_text import questions_of
from josh.run.components import build_env
from josh.types import assistant, user

# The rules as the first version wrote them (quadratic on long replies), kept as the reference semantics.
OLD_QUESTION = re.compile(r"[^.!?]*\?")
OLD_REFERENCE = re.compile(r"\breference\b[^.!?]*?\b(?=[a-z0-9]*\d)[a-z0-9]{5,}\b")
OLD_TIMED = {"leaveAt": re.compile(r"time[^?]*\bleav"), "arriveBy": re.compile(r"time[^?]*\barriv")}
SLOTS = ("name", "food", "area", "pricerange", "type", "stars", "parking", "departure", "day", "leaveAt", "arriveBy")

WORDS = st.sampled_from(
    ["reference", "number", "is", "ab12c", "00000012", "abcde", "time", "leave", "leaving", "arrive", "arriving"]
    + ["what", "name", "area", "day", "when", "stars", "depart", "departing", "from", "by", "at", "_x1234"]
    + [".", "!", "?", " ", ", ", "é", "١٢٣٤٥"]
)
REPLIES = st.lists(WORDS, max_size=40).map(" ".join)


@given(REPLIES)
@settings(max_examples=500, deadline=None)
def test_linear_rules_agree_with_the_original_patterns(reply):
    assert questions_of(reply) == [q for q in re.findall(r"[^.!?]*[.!?]?", reply) if q.endswith("?")]
    assert questions_of(reply) == OLD_QUESTION.findall(reply)
    assert gives_reference(reply) == bool(OLD_REFERENCE.search(reply))
    joined = " ".join(OLD_QUESTION.findall(reply))
    for slot, pattern in OLD_TIMED.items():
        if pattern.search(joined):
            assert slot in asked_slots(reply, [slot])


def test_reply_past_the_read_limit_is_not_read():
    env = build_env("toolwoz", "mini")
    task = next(t for t in env.tasks("test") if t.details.get("booked"))
    agenda = AgendaUser()
    opening = agenda.respond(task, [])
    far = "x" * READ_LIMIT + " what area would you like?"
    near = "what area would you like? " + "x" * READ_LIMIT
    far_reply = agenda.respond(task, [user(opening.text), assistant(far)])
    near_reply = agenda.respond(task, [user(opening.text), assistant(near)])
    assert far_reply.text != near_reply.text


SHAPES = {
    "no sentence end": "a" * 50 + " ",
    "reference words": "reference ",
    "time words": "time ",
    "glued words": "depart",
    "letters only": "abcde",
    "questions": "what time do you leave? ",
    "prose": "the hotel has free parking and wifi ",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_64k_replies_do_not_stall_the_user(shape):
    """The agenda user answers a 64 KB agent reply of each shape with a turn of its own (such replies once took 16.8 s
    each: ``benchmarks/fuzz_outputs.py`` times the agenda user on hostile replies up to 64 KB)."""
    env = build_env("toolwoz", "mini")
    task = env.tasks("test")[0]
    agenda = AgendaUser()
    opening = agenda.respond(task, [])
    reply = (SHAPES[shape] * (65_536 // len(SHAPES[shape]) + 1))[:65_536]
    said = agenda.respond(task, [user(opening.text), assistant(reply)] * 3)
    assert said.text and said.text != reply and len(said.text) < 2_000
