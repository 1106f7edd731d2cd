"""ToolWOZ value normalisation (spec: Normalisation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josh.envs.toolwoz.normalize import (
    NO_CONSTRAINT,
    is_no_constraint,
    is_subset,
    minutes,
    normalize,
    normalize_args,
)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())


def test_lower_strip_and_collapse_white_space() -> None:
    assert normalize("  The   Acorn\tGuest\nHouse ") == "the acorn guest house"


@pytest.mark.parametrize("raw", ["king's college", "kings college", "King\u2019s College", "KING`S COLLEGE"])
def test_apostrophes_are_removed(raw: str) -> None:
    assert normalize(raw) == "kings college"


@pytest.mark.parametrize(("raw", "expected"), [(3, "3"), ("3", "3"), (" 03 ", "3"), (3.0, "3"), (2.5, "2.5"), (0, "0")])
def test_numbers_compare_as_strings(raw: object, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("9:00", "09:00"),
        ("09:00", "09:00"),
        ("9:05 pm", "21:05"),
        ("12:30am", "00:30"),
        ("7pm", "19:00"),
        ("11 a.m.", "11:00"),
        ("12:00:00", "12:00"),  # PMUL1421 writes a train time with seconds
    ],
)
def test_times_become_zero_padded_hh_mm(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize("raw", ["25:00", "9:75", "13pm", "after lunch", "12:00:75"])
def test_non_times_are_left_as_text(raw: str) -> None:
    assert normalize(raw) == raw


@pytest.mark.parametrize(
    "raw", ["", "  ", "dontcare", "dont care", "don't care", "do n't care", "Not Mentioned", "none", "ANY", None]
)
def test_no_constraint_values(raw: object) -> None:
    assert is_no_constraint(raw)


@pytest.mark.parametrize("raw", ["north", "no", "0", "anything", "nonesuch"])
def test_real_values_are_constraints(raw: str) -> None:
    assert not is_no_constraint(raw)


def test_train_ids_compare_case_insensitively() -> None:
    assert normalize("TR7075") == normalize("tr7075") == normalize(" Tr7075 ")


def test_booleans_and_huge_digit_strings() -> None:
    assert normalize(True) == "true"
    assert normalize("0" * 10_000 + "7") == "7"


def test_normalize_args_drops_no_constraint_entries() -> None:
    assert normalize_args({"area": "dontcare", "food": " Italian ", "people": 3}) == {"food": "italian", "people": "3"}


def test_minutes() -> None:
    assert minutes("09:36") == 9 * 60 + 36
    assert minutes("24:08") == 24 * 60 + 8  # MultiWOZ writes some after-midnight arrivals this way
    assert minutes("9:36") is None
    assert minutes("ab:cd") is None
    assert minutes("48:00") is None


def test_is_subset() -> None:
    assert is_subset({}, {"a": "1"})
    assert is_subset({"a": "1"}, {"a": "1", "b": "2"})
    assert not is_subset({"a": "1"}, {"a": "2"})
    assert not is_subset({"a": "1"}, {})


@given(st.text())
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once


@given(json_scalars)
def test_normalize_never_raises_and_never_keeps_edge_space(value: object) -> None:
    text = normalize(value)
    assert text == text.strip()
    assert "  " not in text
    assert "'" not in text


@given(st.dictionaries(st.text(max_size=8), json_scalars, max_size=6))
def test_normalize_args_keeps_only_constraints(args: dict[str, object]) -> None:
    out = normalize_args(args)
    assert set(out) <= set(args)
    assert not any(value in NO_CONSTRAINT for value in out.values())
