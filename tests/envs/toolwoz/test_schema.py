"""ToolWOZ tool schemas and argument validation (spec: Tool calls and errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josh.envs.toolwoz.schema import TOOLS, Rejection, ValidCall, openai_tools, validate
from josh.types import ErrorCategory

VALIDATION_CATEGORIES = {
    ErrorCategory.MALFORMED,
    ErrorCategory.UNKNOWN_TOOL,
    ErrorCategory.UNKNOWN_ARGUMENT,
    ErrorCategory.INVALID_VALUE,
}
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text()),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def category(name: object, arguments: object) -> ErrorCategory | None:
    result = validate(name, arguments)
    return result.category if isinstance(result, Rejection) else None


def test_schemas_match_toolwoz_names_parameters_and_enums(shared_data: Path) -> None:
    reference = json.loads((shared_data / "toolwoz/tools.json").read_text())
    theirs = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in reference}
    ours = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in openai_tools()}
    assert set(ours) == set(theirs)
    for name, props in theirs.items():
        assert set(ours[name]) == set(props), name
        for key, prop in props.items():
            assert set(ours[name][key].get("enum", [])) == set(prop.get("enum", [])), (name, key)


def test_descriptions_are_our_own(shared_data: Path) -> None:
    reference = json.loads((shared_data / "toolwoz/tools.json").read_text())
    theirs = {t["function"]["description"] for t in reference}
    theirs |= {p["description"] for t in reference for p in t["function"]["parameters"]["properties"].values()}
    ours = {t["function"]["description"] for t in openai_tools()}
    ours |= {p["description"] for t in openai_tools() for p in t["function"]["parameters"]["properties"].values()}
    assert not ours & theirs


def test_openai_format() -> None:
    for tool in openai_tools():
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        assert params["type"] == "object"
        assert all(p["type"] == "string" for p in params["properties"].values())
    assert openai_tools() is not openai_tools()  # callers may mutate their copy


def test_book_attraction_exists_and_takes_no_arguments() -> None:
    assert TOOLS["book_attraction"].params == {}
    assert category("book_attraction", {}) is None
    assert category("book_attraction", {"name": "kings college"}) is ErrorCategory.UNKNOWN_ARGUMENT


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"', "null", [1, 2], None, 7, ("a", 1)])
def test_arguments_that_are_not_an_object_are_malformed(arguments: object) -> None:
    assert category("search_hotel", arguments) is ErrorCategory.MALFORMED


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_missing_name_is_malformed(name: object) -> None:
    assert category(name, {}) is ErrorCategory.MALFORMED


def test_json_text_arguments_are_parsed() -> None:
    result = validate("search_hotel", '{"area": "North"}')
    assert isinstance(result, ValidCall)
    assert result.args == {"area": "north"}
    assert validate("search_hotel", "  ") == ValidCall(TOOLS["search_hotel"], {})


@pytest.mark.parametrize("name", ["search_taxi", "book_hospital", "Search_Hotel", "search_hotel "])
def test_unknown_tool(name: str) -> None:
    assert category(name, {}) is ErrorCategory.UNKNOWN_TOOL


@pytest.mark.parametrize("key", ["LeaveAt", "price", "location", ""])
def test_unknown_argument(key: str) -> None:
    assert category("search_train", {key: "x"}) is ErrorCategory.UNKNOWN_ARGUMENT


@pytest.mark.parametrize("value", [["cheap"], {"min": "cheap"}, [], {}])
def test_list_or_dict_value_is_invalid(value: object) -> None:
    assert category("search_restaurant", {"food": value}) is ErrorCategory.INVALID_VALUE


@pytest.mark.parametrize(("key", "value"), [("pricerange", "free"), ("stars", "5"), ("stars", 7), ("parking", True)])
def test_value_outside_enum_is_invalid(key: str, value: object) -> None:
    assert category("search_hotel", {key: value}) is ErrorCategory.INVALID_VALUE


def test_enum_values_are_compared_normalised() -> None:
    result = validate("search_hotel", {"pricerange": " Cheap ", "stars": 4, "area": "dontcare", "type": "GuestHouse"})
    assert isinstance(result, ValidCall)
    assert result.args == {"pricerange": "cheap", "stars": "4", "type": "guesthouse"}


def test_check_order() -> None:
    assert category("no_such_tool", "{broken") is ErrorCategory.MALFORMED
    assert category("no_such_tool", {"bogus": []}) is ErrorCategory.UNKNOWN_TOOL
    assert category("search_hotel", {"stars": "9", "bogus": "x"}) is ErrorCategory.UNKNOWN_ARGUMENT


def test_messages_echo_bounded_text() -> None:
    result = validate("search_hotel", {"x" * 100_000: "1"})
    assert isinstance(result, Rejection)
    assert len(result.message) < 400
    assert json.loads(result.to_json())["error"] == "unknown_argument"


def test_free_text_accepts_unicode_and_huge_strings() -> None:
    result = validate("search_restaurant", {"name": "caf\u00e9 \U0001f600 " + "y" * 1_000_000})
    assert isinstance(result, ValidCall)


@given(st.one_of(st.sampled_from(sorted(TOOLS)), st.text()), st.one_of(json_values, st.text()))
def test_validate_never_raises(name: str, arguments: object) -> None:
    result = validate(name, arguments)
    assert isinstance(result, (ValidCall, Rejection))
    if isinstance(result, Rejection):
        assert result.category in VALIDATION_CATEGORIES
        json.loads(result.to_json())


@given(st.sampled_from(sorted(TOOLS)), st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_valid_calls_keep_only_declared_keys(name: str, arguments: dict[str, object]) -> None:
    result = validate(name, arguments)
    if isinstance(result, ValidCall):
        assert set(result.args) <= set(TOOLS[name].params)
        assert all(isinstance(v, str) for v in result.args.values())
