"""ToolWOZ goal completion and reward (spec: Goal completion and reward)."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.core.env import ConversationState
from josh.envs.toolwoz.db import ToolWOZDB
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.goals import TaskError, TaskPlan
from josh.envs.toolwoz.task import DomainGoal, make_task
from josh.types import Goal, Task, ToolCall


@pytest.fixture(scope="module")
def env(shared_data: Path) -> ToolWOZEnv:
    return ToolWOZEnv(ToolWOZDB.load(shared_data / "multiwoz/db"))


HOTEL = DomainGoal(info={"area": "north", "pricerange": "cheap"}, book={"stay": "2", "day": "monday", "people": "1"})
TRAIN = DomainGoal(
    info={"departure": "cambridge", "destination": "norwich", "day": "friday", "leaveAt": "09:00"}, book={"people": "2"}
)


def two_domain_task() -> Task:
    """Hotel (search + booking of worth house) and train (search + booking of TR8056, the 09:36)."""
    return make_task(
        "t",
        {"hotel": HOTEL, "train": TRAIN},
        booked={"hotel": {"name": "worth house", "reference": "H1"}, "train": {"trainID": "TR8056", "reference": "T1"}},
    )


def run(env: ToolWOZEnv, state: ConversationState, tool: str, /, **args: object) -> tuple[int, ...]:
    return env.call(state, ToolCall(name=tool, arguments=args)).completed_goals


def test_goal_indices(env: ToolWOZEnv) -> None:
    assert [g.name for g in two_domain_task().goals] == ["search_hotel", "book_hotel", "search_train", "book_train"]


def test_search_with_goal_constraints_and_booked_entity_served_completes(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    # cheap north hotels: city centre north b and b, worth house; U = worth house is served.
    assert run(env, state, "search_hotel", area="north", pricerange="cheap") == (0,)


def test_search_goal_needs_booked_entity_when_a_booking_goal_exists(env: ToolWOZEnv) -> None:
    task = make_task("t", {"hotel": HOTEL}, booked={"hotel": {"name": "acorn guest house", "reference": "H"}})
    state = env.reset(task)
    assert run(env, state, "search_hotel", area="north", pricerange="cheap") == ()


def test_search_goal_without_booking_completes_on_constraints(env: ToolWOZEnv) -> None:
    state = env.reset(make_task("t", {"hotel": DomainGoal(info={"area": "north", "pricerange": "cheap"})}))
    assert run(env, state, "search_hotel", area="north", pricerange="cheap", parking="yes") == (0,)


def test_under_specified_search_does_not_complete(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    assert run(env, state, "search_hotel", area="north") == ()
    assert run(env, state, "search_train", departure="cambridge", destination="norwich", day="friday") == ()


def test_single_served_row_satisfying_goal_and_being_the_entity_completes(env: ToolWOZEnv) -> None:
    # Naming the entity is not a superset of G, but the one row served satisfies G and is U.
    state = env.reset(two_domain_task())
    assert run(env, state, "search_hotel", name="worth house") == (0,)


def test_served_row_satisfying_goal_completes_without_booking(env: ToolWOZEnv) -> None:
    state = env.reset(make_task("t", {"hotel": DomainGoal(info={"area": "north", "pricerange": "cheap"})}))
    assert run(env, state, "search_hotel", name="worth house", stars="4") == (0,)


def test_train_search_goal_uses_at_or_after(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    args = {"departure": "cambridge", "destination": "norwich", "day": "friday"}
    assert run(env, state, "search_train", **args, leaveAt="9:00") == (2,)
    assert run(env, state, "book_train", trainID="TR8056", people="2") == (3,)


def test_goal_completes_at_most_once(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    assert run(env, state, "book_hotel", name="worth house", stay=2, day="monday", people=1) == (1,)
    assert run(env, state, "book_hotel", name="worth house", stay=2, day="monday", people=1) == ()
    assert state.completed == {1}


def test_failed_booking_completes_nothing(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    assert run(env, state, "book_hotel", name="worth house", stay=3, day="monday", people=1) == ()


def test_invalid_call_completes_nothing(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    assert run(env, state, "search_hotel", area="north", pricerange="cheap", bogus="1") == ()
    assert run(env, state, "search_hotel", area="north", pricerange="cheap", stars="9") == ()
    assert not state.completed


def test_fail_info_search_completes_nothing(env: ToolWOZEnv) -> None:
    goal = DomainGoal(info={"area": "north"}, fail_info={"area": "north", "stars": "1"})
    state = env.reset(make_task("t", {"hotel": goal}))
    assert run(env, state, "search_hotel", area="north", stars="1") == ()
    assert run(env, state, "search_hotel", area="north") == (0,)


def test_several_goals_can_complete_in_one_call(env: ToolWOZEnv) -> None:
    base = make_task("t", {"hotel": DomainGoal(info={"area": "north"})})
    extra = Goal(name="search_hotel", parameters={"area": "north", "type": "hotel"})
    task = base.model_copy(update={"goals": [*base.goals, extra]})
    state = env.reset(task)
    assert run(env, state, "search_hotel", area="north", type="hotel") == (0, 1)


def test_reward_is_completed_over_total(env: ToolWOZEnv) -> None:
    state = env.reset(two_domain_task())
    assert env.reward(state, []) == 0.0
    run(env, state, "book_hotel", name="worth house", stay=2, day="monday", people=1)
    assert env.reward(state, []) == 0.25
    run(env, state, "search_hotel", area="north", pricerange="cheap")
    run(env, state, "search_train", departure="cambridge", destination="norwich", day="friday", leaveAt="09:00")
    run(env, state, "book_train", trainID="TR8056", people=2)
    assert env.reward(state, []) == 1.0


def test_task_without_goals_has_zero_reward(env: ToolWOZEnv) -> None:
    state = env.reset(make_task("t", {}))
    assert run(env, state, "search_hotel", area="north") == ()
    assert env.reward(state, []) == 0.0


def test_invalid_details_raise_a_task_error(env: ToolWOZEnv) -> None:
    task = Task(env="toolwoz", id="bad", details={"domains": "hotel", "goal": []})
    with pytest.raises(TaskError, match="'bad'"):
        TaskPlan.compile(task, env.db)
    with pytest.raises(ValueError, match="'bad'"):
        env.reset(task)
