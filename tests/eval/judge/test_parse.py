"""Reading a judge's answer: every well-formed answer is read exactly, everything else is a ``JudgeOutputError``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josh.eval.judge.parse import JudgeOutputError, parse_judgement
from josh.eval.judge.rubric import DIMENSIONS

NAMES = list(DIMENSIONS)
scores = st.fixed_dictionaries({n: st.integers(1, 5) for n in NAMES})
prose = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=40)


@given(scores, prose, prose)
def test_a_well_formed_answer_is_read_exactly_whatever_surrounds_it(given_scores, before, after) -> None:
    answer = {n: {"score": s, "why": f"because {n}"} for n, s in given_scores.items()}
    read, why = parse_judgement(before + json.dumps(answer) + after, NAMES)
    assert read == given_scores and why == {n: f"because {n}" for n in NAMES}


@given(st.sampled_from(NAMES), st.one_of(st.integers(-3, 0), st.integers(6, 99)))
def test_a_score_out_of_range_is_an_error(name: str, bad: int) -> None:
    answer = {n: {"score": 3, "why": ""} for n in NAMES} | {name: {"score": bad, "why": ""}}
    with pytest.raises(JudgeOutputError, match=f"{name}: score {bad} is outside 1-5"):
        parse_judgement(json.dumps(answer), NAMES)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I would give it a four.", "no JSON object"),
        ('{"cohesion": {"score": 4}}', "backend: missing"),
        ('{"cohesion": 4, "backend": "five", "policy": 3}', "backend: score 'five' is not a number"),
        ('{"cohesion": 4, "backend": 2.5, "policy": 3}', "backend: score 2.5 is not a whole number"),
        ('{"cohesion": 4, "backend": true, "policy": 3}', "backend: score True is not a number"),
        ('{"cohesion": {"why": "fine"}, "backend": 2, "policy": 3}', "cohesion: no score"),
    ],
)
def test_answers_without_usable_scores_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(JudgeOutputError, match=message):
        parse_judgement(text, NAMES)


def test_bare_and_string_scores_and_a_missing_policy_dimension_are_read() -> None:
    read, why = parse_judgement('```json\n{"cohesion": "4", "backend": 5}\n```', ["cohesion", "backend"])
    assert read == {"cohesion": 4, "backend": 5} and why == {"cohesion": "", "backend": ""}
