"""ToolWOZEnv end to end: the Env protocol, call logging, forks, robustness and the spec's seven differences."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josh.core.env import ConversationState, Env
from josh.envs.toolwoz.db import ToolWOZDB
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.schema import TOOLS
from josh.envs.toolwoz.task import DomainGoal, make_task
from josh.types import ErrorCategory, Task, ToolCall, ToolResult

VALIDATION_CATEGORIES = {
    ErrorCategory.MALFORMED,
    ErrorCategory.UNKNOWN_TOOL,
    ErrorCategory.UNKNOWN_ARGUMENT,
    ErrorCategory.INVALID_VALUE,
}
PARAM_NAMES = sorted({key for spec in TOOLS.values() for key in spec.params})
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
json_values = st.recursive(
    st.one_of(scalars, st.sampled_from(["north", "cheap", "4", "09:00", "dontcare", "TR8056", "worth house"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
random_args = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(PARAM_NAMES), st.text(max_size=8)), json_values, max_size=6),
    st.text(max_size=40),
)
random_calls = st.builds(
    lambda name, args: ToolCall(name=name, arguments=args),
    st.one_of(st.sampled_from(sorted(TOOLS)), st.text(max_size=20)),
    random_args,
)


@pytest.fixture(scope="module")
def env(shared_data: Path) -> ToolWOZEnv:
    return ToolWOZEnv(ToolWOZDB.load(shared_data / "multiwoz/db"))


def full_task(task_id: str = "t") -> Task:
    return make_task(
        task_id,
        {
            "hotel": DomainGoal(
                info={"area": "north", "pricerange": "cheap"}, book={"stay": "2", "day": "monday", "people": "1"}
            ),
            "attraction": DomainGoal(info={"name": "king's college"}),
            "train": DomainGoal(
                info={"departure": "cambridge", "destination": "norwich", "day": "friday", "leaveAt": "09:00"},
                book={"people": "2"},
            ),
        },
        booked={"hotel": {"name": "worth house", "reference": "H1"}, "train": {"trainID": "TR8056", "reference": "T1"}},
        split="test",
    )


def call(env: ToolWOZEnv, state: ConversationState, tool: str, /, **args: object) -> ToolResult:
    return env.call(state, ToolCall(name=tool, arguments=args))


# --- protocol and bookkeeping ---------------------------------------------------------------------------------------


def test_implements_env_protocol(env: ToolWOZEnv) -> None:
    assert isinstance(env, Env)
    assert env.name == "toolwoz"
    assert sorted(t["function"]["name"] for t in env.tools) == sorted(TOOLS)
    assert "Cambridge" in env.system_prompt(full_task())


def test_accepts_a_db_folder(shared_data: Path) -> None:
    assert len(ToolWOZEnv(shared_data / "multiwoz/db").db["hotel"]) == 33


def test_reset_rejects_other_envs(env: ToolWOZEnv) -> None:
    with pytest.raises(ValueError, match="retail"):
        env.reset(Task(id="r1", env="retail"))


def test_tasks_by_split_mapping_and_callable(env: ToolWOZEnv) -> None:
    task = full_task()
    by_split = ToolWOZEnv(env.db, tasks={"test": [task]})
    assert by_split.tasks("test") == [task]
    with pytest.raises(ValueError, match="unknown ToolWOZ split 'val'; known splits: test"):
        by_split.tasks("val")
    from_callable = ToolWOZEnv(env.db, tasks=lambda split: [task] if split == "val" else [])
    assert from_callable.tasks("val") == [task]
    assert from_callable.tasks("train") == []
    with pytest.raises(ValueError, match="without tasks"):
        env.tasks("test")


def test_call_logs_every_call_with_raw_arguments(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    good = call(env, state, "search_hotel", area="North", pricerange="cheap")
    bad = env.call(state, ToolCall(name="search_hotel", arguments="{oops"))
    assert [r.name for r in state.log] == ["search_hotel", "search_hotel"]
    assert state.log[0].arguments == {"area": "North", "pricerange": "cheap"}
    assert state.log[0].completed_goals == good.completed_goals == (0,)
    assert state.log[1].arguments == "{oops" and state.log[1].error is ErrorCategory.MALFORMED
    assert bad.error is ErrorCategory.MALFORMED
    assert json.loads(bad.content)["error"] == "malformed"
    assert json.loads(good.content)[0]["name"] == "worth house"
    assert good.data["name"] == "worth house"


def test_repeated_goal_call_reports_nothing_new(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    assert call(env, state, "search_attraction", name="kings college").completed_goals == (2,)
    again = call(env, state, "search_attraction", name="kings college")
    assert again.completed_goals == () and state.log[-1].completed_goals == ()


def test_non_toolcall_objects_do_not_raise(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    odd = env.call(state, SimpleNamespace(name=7, arguments=[1, 2]))  # type: ignore[arg-type]
    assert odd.error is ErrorCategory.MALFORMED
    assert state.log[-1].name == "7" and state.log[-1].arguments == "[1, 2]"


def test_internal_failure_becomes_tool_error(env: ToolWOZEnv) -> None:
    broken = Task(env="toolwoz", id="broken", details={"domains": 5})
    state = ConversationState(broken)  # bypasses reset, which would refuse this task
    result = call(env, state, "search_hotel", area="north")
    assert result.error is ErrorCategory.TOOL_ERROR
    assert "broken" in json.loads(result.content)["message"]
    assert state.log[-1].error is ErrorCategory.TOOL_ERROR


def test_forks_do_not_affect_each_other(env: ToolWOZEnv) -> None:
    parent = env.reset(full_task())
    call(env, parent, "search_attraction", name="kings college")
    child = parent.fork()
    call(env, child, "book_train", trainID="TR8056", people="2")
    call(env, parent, "search_hotel", area="north")
    assert parent.completed == {2} and child.completed == {2, 4}
    assert [r.name for r in parent.log] == ["search_attraction", "search_hotel"]
    assert [r.name for r in child.log] == ["search_attraction", "book_train"]
    assert child.task is parent.task


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(random_calls)
def test_random_calls_never_raise(env: ToolWOZEnv, tool_call: ToolCall) -> None:
    state = env.reset(full_task())
    result = env.call(state, tool_call)
    assert isinstance(result, ToolResult)
    assert result.error is None or result.error in VALIDATION_CATEGORIES
    json.loads(result.content)
    assert len(state.log) == 1
    if result.error is not None:
        assert result.completed_goals == ()


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.lists(random_calls, max_size=6), st.lists(random_calls, max_size=6))
def test_forked_states_never_affect_each_other(env: ToolWOZEnv, left: list[ToolCall], right: list[ToolCall]) -> None:
    root = env.reset(full_task())
    call(env, root, "search_attraction", name="kings college")
    a, b = root.fork(), root.fork()
    for tool_call in left:
        env.call(a, tool_call)
    solo = root.fork()
    for tool_call in right:
        env.call(b, tool_call)
        env.call(solo, tool_call)
    assert root.completed == {2} and len(root.log) == 1
    assert b.completed == solo.completed
    assert b.log == solo.log
    assert len(a.log) == 1 + len(left)


# --- the seven intended differences from the original code (spec, last section) -------------------------------------


def test_difference_1_enum_values_are_validated(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    assert call(env, state, "search_hotel", area="downtown").error is ErrorCategory.INVALID_VALUE
    assert call(env, state, "search_hotel", stars="5").error is ErrorCategory.INVALID_VALUE


def test_difference_2_numbers_and_times_are_normalised(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    assert call(env, state, "book_hotel", name="worth house", stay=2, day="monday", people=1).completed_goals == (1,)
    args = {"departure": "cambridge", "destination": "norwich", "day": "friday"}
    assert call(env, state, "search_train", **args, leaveAt="9:00").completed_goals == (3,)


def test_difference_3_names_with_apostrophes_can_be_found(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    for spelling in ("king's college", "kings college", "King\u2019s College"):
        rows = json.loads(call(env, state, "search_attraction", name=spelling).content)
        assert [r["name"] for r in rows] == ["king's college"]
    assert state.completed == {2}


def test_difference_4_train_times_are_inclusive_in_query_and_goal_check(env: ToolWOZEnv) -> None:
    base = {"departure": "cambridge", "destination": "norwich", "day": "friday"}
    state = env.reset(full_task())
    exact = call(env, state, "search_train", **base, leaveAt="09:36", arriveBy="10:55")
    assert [r["trainID"] for r in json.loads(exact.content)] == ["TR8056"]  # strict > / < would exclude it
    # Goal leaveAt 09:00: the served TR8056 leaves at 09:36, which satisfies "at or after" (equality would not).
    assert exact.completed_goals == (3,)
    state = env.reset(full_task())
    served = call(env, state, "search_train", **base, leaveAt="09:00")
    assert json.loads(served.content)[0]["trainID"] == "TR8056" and served.completed_goals == (3,)


def test_difference_5_fail_info_searches_return_nothing(env: ToolWOZEnv) -> None:
    goal = DomainGoal(info={"food": "chinese", "area": "north"}, fail_info={"food": "korean", "area": "north"})
    state = env.reset(make_task("t", {"restaurant": goal}))
    assert call(env, state, "search_restaurant", food="korean", area="north").content == "[]"
    assert call(env, state, "search_restaurant", food="chinese", area="north").content != "[]"


def test_difference_6_booking_counts_only_if_it_succeeded(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    failed = call(env, state, "book_train", trainID="TR8056", people="2", name="x")  # unknown argument
    assert failed.error is ErrorCategory.UNKNOWN_ARGUMENT and failed.completed_goals == ()
    failed = call(env, state, "book_train", trainID="TR8056", people="3")
    assert json.loads(failed.content) == {"success": False} and failed.completed_goals == ()
    done = call(env, state, "book_train", trainID="tr8056", people="2")
    assert json.loads(done.content)["success"] is True and done.completed_goals == (4,)


def test_difference_7_unknown_tool_and_malformed_get_different_categories(env: ToolWOZEnv) -> None:
    state = env.reset(full_task())
    assert call(env, state, "search_taxi").error is ErrorCategory.UNKNOWN_TOOL
    assert env.call(state, ToolCall(name="search_hotel", arguments="not json")).error is ErrorCategory.MALFORMED
    assert [r.error for r in state.log] == [ErrorCategory.UNKNOWN_TOOL, ErrorCategory.MALFORMED]
