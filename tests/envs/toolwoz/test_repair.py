"""Goals checked against the real MultiWOZ database: names the dialogue spells otherwise, booked entities that
break their own goal, bookings without an entity, and defects (cases taken from the paper's ToolWOZ dialogues)."""

from pathlib import Path

import pytest

from josh.envs.toolwoz.db import ToolWOZDB
from josh.envs.toolwoz.repair import check_goal, resolve_name
from josh.envs.toolwoz.task import DomainGoal, make_task


@pytest.fixture(scope="module")
def db(shared_data: Path) -> ToolWOZDB:
    return ToolWOZDB.load(shared_data / "multiwoz" / "db")


def _goal(**domains: dict) -> dict[str, DomainGoal]:
    return {d: DomainGoal.model_validate(spec) for d, spec in domains.items()}


def test_a_booked_name_resolves_to_the_database_spelling(db: ToolWOZDB) -> None:
    goal = _goal(
        restaurant={"info": {"food": "italian", "pricerange": "cheap", "area": "centre"}, "book": {"people": "6"}}
    )
    checked = check_goal(goal, {"restaurant": {"name": "ask", "reference": "Y2Y8QYBY"}}, db)  # MUL0003
    assert checked.booked["restaurant"] == {"name": "ask restaurant", "reference": "Y2Y8QYBY"}
    assert "'ask' is 'ask restaurant'" in checked.repairs["restaurant"] and not checked.defect
    longer = check_goal(
        _goal(restaurant={"info": {"area": "centre"}, "book": {"people": "2"}}),
        {"restaurant": {"name": "meze bar restaurant"}},
        db,
    )  # MUL0289: the dialogue's name is longer
    assert longer.booked["restaurant"]["name"] == "meze bar"


def test_a_name_constraint_resolves_too_and_ambiguous_names_do_not(db: ToolWOZDB) -> None:
    checked = check_goal(_goal(restaurant={"info": {"name": "ask"}}), {}, db)  # PMUL2351
    assert checked.goal["restaurant"].info == {"name": "ask restaurant"}
    assert resolve_name(db["restaurant"], "pizza hut", frozenset()) is None  # three pizza huts: no guess


def test_a_booked_entity_that_breaks_the_goal_is_replaced_by_one_that_meets_it(db: ToolWOZDB) -> None:
    hotel = _goal(hotel={"info": {"area": "north", "parking": "no", "type": "guesthouse"}, "book": {"stay": "2"}})
    checked = check_goal(hotel, {"hotel": {"name": "acorn guest house", "reference": "R1"}}, db)  # MUL0102
    table = db["hotel"]
    (row,) = table.rows_with_key(checked.booked["hotel"]["name"])
    assert table.matches(row, table.compile({"area": "north", "parking": "no", "type": "guesthouse"}))
    assert "breaks parking" in checked.repairs["hotel"] and checked.booked["hotel"]["reference"] == "R1"


def test_a_train_stand_in_leaves_soonest_after_the_asked_time(db: ToolWOZDB) -> None:
    info = {"leaveAt": "09:45", "destination": "cambridge", "day": "thursday", "departure": "stevenage"}
    checked = check_goal(_goal(train={"info": info, "book": {"people": "8"}}), {"train": {"trainID": "TR2860"}}, db)
    table = db["train"]
    (row,) = table.rows_with_key(checked.booked["train"]["trainID"].lower())
    assert table.values[row]["day"] == "thursday" and table.values[row]["leaveAt"] == "09:54"  # MUL0225
    assert "breaks day" in checked.repairs["train"]


def test_a_booking_without_entity_gets_one_and_becomes_a_goal(db: ToolWOZDB) -> None:
    goal = _goal(hotel={"info": {"area": "centre", "type": "guesthouse"}, "book": {"stay": "4", "people": "8"}})
    checked = check_goal(goal, {"hotel": {"reference": "HU7TJ6XU"}}, db)  # MUL0023
    task = make_task("MUL0023", checked.goal, booked=checked.booked, repairs=checked.repairs)
    assert [g.name for g in task.goals] == ["search_hotel", "book_hotel"]
    assert "booking names no name" in task.details["repairs"]["hotel"]


def test_defects_and_unsatisfiable_searches(db: ToolWOZDB) -> None:
    nothing = {"food": "klingon", "area": "centre"}
    assert not check_goal(_goal(restaurant={"info": nothing}), {}, db).defect  # a search goal alone stays completable
    booked = check_goal(_goal(restaurant={"info": nothing, "book": {"people": "2"}}), {"restaurant": {"name": "x"}}, db)
    assert booked.defect == "no restaurant in the database satisfies the search goal"
    unknown = check_goal(_goal(hotel={"info": {"name": "hotel that never was"}}), {}, db)
    assert unknown.defect == "no hotel in the database is called 'hotel that never was'"
    assert "defect" in make_task("T", unknown.goal, defect=unknown.defect).details
