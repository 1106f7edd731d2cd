"""ToolWOZ DB loading and serving (spec: Data, Serving: search, Serving: booking)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from josh.envs.toolwoz.db import DBError, ToolWOZDB
from josh.envs.toolwoz.goals import TaskPlan
from josh.envs.toolwoz.normalize import normalize_args
from josh.envs.toolwoz.serving import serve_booking, serve_search
from josh.envs.toolwoz.task import DomainGoal, make_task
from josh.types import Task


@pytest.fixture(scope="module")
def db(shared_data: Path) -> ToolWOZDB:
    return ToolWOZDB.load(shared_data / "multiwoz/db")


def served_name(db: ToolWOZDB, task: Task, domain: str, args: dict[str, object]) -> str | None:
    """The entity key of the row a search is served, or None for ``[]``."""
    table = db[domain]
    plan = TaskPlan.compile(task, db).domains[domain]
    served = serve_search(table, plan, normalize_args(args))
    rows = json.loads(served.content(table))
    assert len(rows) <= 1
    return rows[0][table.key] if rows else None


GOAL_INFO = {"food": "italian", "area": "centre", "pricerange": "cheap"}


def restaurant_task(booked: str | None = "zizzi cambridge", fail_info: dict[str, str] | None = None) -> Task:
    """A cheap italian restaurant in the centre, booked at ``booked`` (cheap italian centre: pizza hut city centre,
    ask restaurant, zizzi cambridge)."""
    goal = DomainGoal(info=GOAL_INFO, book={"time": "19:00", "day": "friday", "people": "3"}, fail_info=fail_info or {})
    booked_map = {"restaurant": {"name": booked, "reference": "REF42"}} if booked else {}
    return make_task("t", {"restaurant": goal}, booked=booked_map)


# --- loading -----------------------------------------------------------------------------------------------------


def test_load_indexes_all_four_domains(db: ToolWOZDB) -> None:
    assert {d: len(t) for d, t in db.tables.items()} == {
        "restaurant": 110,
        "hotel": 33,
        "attraction": 79,
        "train": 2828,
    }


def test_rows_drop_location_introduction_and_nulls(db: ToolWOZDB) -> None:
    for table in db.tables.values():
        for row, text in zip(table.rows, table.row_json, strict=True):
            assert "location" not in row and "introduction" not in row
            assert None not in row.values()
            assert json.loads(text) == dict(row)


def test_missing_folder_and_file(tmp_path: Path) -> None:
    with pytest.raises(DBError, match="not a folder"):
        ToolWOZDB.load(tmp_path / "nowhere")
    with pytest.raises(DBError, match=r"restaurant_db\.json: file not found"):
        ToolWOZDB.load(tmp_path)


def write_db(folder: Path, **overrides: str) -> None:
    good = {
        "restaurant": [{"name": "a", "food": "thai"}],
        "hotel": [{"name": "h"}],
        "attraction": [{"name": "x"}],
        "train": [
            {
                "trainID": "TR1",
                "day": "monday",
                "departure": "a",
                "destination": "b",
                "leaveAt": "05:00",
                "arriveBy": "06:00",
            }
        ],
    }
    for domain, records in good.items():
        (folder / f"{domain}_db.json").write_text(overrides.get(domain, json.dumps(records)))


def test_corrupt_json_names_the_file_and_position(tmp_path: Path) -> None:
    write_db(tmp_path, hotel='[{"name": "h",]')
    with pytest.raises(DBError, match=r"hotel_db\.json: not valid JSON \(line 1, column"):
        ToolWOZDB.load(tmp_path)


@pytest.mark.parametrize(
    ("domain", "text", "message"),
    [
        ("attraction", '{"name": "x"}', "expected a JSON list"),
        ("attraction", '[{"name": "x"}, 5]', "record 1: expected a JSON object"),
        ("restaurant", '[{"food": "thai"}]', "record 0: missing or empty 'name'"),
        (
            "train",
            '[{"trainID": "TR1", "day": "monday", "departure": "a", "destination": "b", "leaveAt": "5am"}]',
            "record 0 \\(TR1\\): missing 'arriveBy'",
        ),
        (
            "train",
            '[{"trainID": "TR1", "day": "x", "departure": "a", "destination": "b", "leaveAt": "soon", "arriveBy": "06:00"}]',
            "record 0 \\(TR1\\): leaveAt='soon' is not an HH:MM time",
        ),
    ],
)
def test_bad_records_name_the_file_and_record(tmp_path: Path, domain: str, text: str, message: str) -> None:
    write_db(tmp_path, **{domain: text})
    with pytest.raises(DBError, match=f"{domain}_db\\.json.*{message}"):
        ToolWOZDB.load(tmp_path)


def test_small_valid_db_loads(tmp_path: Path) -> None:
    write_db(tmp_path)
    assert len(ToolWOZDB.load(tmp_path)["train"]) == 1


def test_an_unchanged_folder_is_read_once_and_a_changed_file_again(tmp_path: Path) -> None:
    write_db(tmp_path)
    first = ToolWOZDB.load(tmp_path)
    assert ToolWOZDB.load(tmp_path) is first and ToolWOZDB.load(tmp_path / ".") is first
    write_db(tmp_path, hotel=json.dumps([{"name": "h"}, {"name": "other hotel"}]))
    again = ToolWOZDB.load(tmp_path)
    assert again is not first and len(again["hotel"]) == 2 and len(first["hotel"]) == 1
    write_db(tmp_path, hotel="[")
    with pytest.raises(DBError, match=r"hotel_db\.json: not valid JSON"):
        ToolWOZDB.load(tmp_path)


# --- search --------------------------------------------------------------------------------------------------------


def test_domain_without_goal_returns_first_match_in_db_order(db: ToolWOZDB) -> None:
    task = restaurant_task()
    assert served_name(db, task, "hotel", {"area": "north"}) == "acorn guest house"
    assert served_name(db, task, "hotel", {"area": "north", "stars": "1"}) is None


def test_complete_search_with_booking_returns_booked_entity(db: ToolWOZDB) -> None:
    assert (
        served_name(db, restaurant_task(), "restaurant", {"food": "Italian", "area": "centre", "pricerange": "cheap"})
        == "zizzi cambridge"
    )


def test_complete_search_with_booked_entity_outside_results_returns_nothing(db: ToolWOZDB) -> None:
    # Every row matching a superset of G satisfies G, so no "wrong" row exists either.
    task = restaurant_task(booked="clowns cafe")
    assert served_name(db, task, "restaurant", {"food": "italian", "area": "centre", "pricerange": "cheap"}) is None


def test_complete_search_without_booking_returns_first_match(db: ToolWOZDB) -> None:
    task = restaurant_task(booked=None)
    assert (
        served_name(db, task, "restaurant", {"food": "italian", "area": "centre", "pricerange": "cheap"})
        == "pizza hut city centre"
    )


def test_under_specified_search_is_served_a_row_that_breaks_the_goal(db: ToolWOZDB) -> None:
    task = restaurant_task()
    name = served_name(db, task, "restaurant", {"food": "italian", "area": "centre"})
    assert name == "stazione restaurant and coffee bar"  # first italian centre restaurant that is not cheap
    first_breaking = next(r["name"] for r in db["restaurant"].rows if any(r[k] != v for k, v in GOAL_INFO.items()))
    assert db["restaurant"].rows[0]["name"] == "pizza hut city centre"  # the first row satisfies G ...
    assert served_name(db, task, "restaurant", {}) == first_breaking  # ... so an empty search skips it


def test_under_specified_search_falls_back_to_booked_entity_then_first_row(db: ToolWOZDB) -> None:
    task = make_task(
        "t",
        {"restaurant": DomainGoal(info={"name": "zizzi cambridge", "food": "italian"}, book={"people": "2"})},
        booked={"restaurant": {"name": "zizzi cambridge", "reference": "R"}},
    )
    # Only zizzi matches the name, and it satisfies G: no breaking row, so U itself is served.
    assert served_name(db, task, "restaurant", {"name": "zizzi cambridge"}) == "zizzi cambridge"
    no_booking = make_task("t", {"restaurant": DomainGoal(info={"name": "zizzi cambridge", "food": "italian"})})
    assert served_name(db, no_booking, "restaurant", {"name": "zizzi cambridge"}) == "zizzi cambridge"


def test_conflicting_search_returns_first_match(db: ToolWOZDB) -> None:
    task = restaurant_task()
    assert served_name(db, task, "restaurant", {"food": "italian", "area": "centre", "pricerange": "expensive"}) == (
        "stazione restaurant and coffee bar"
    )


def test_fail_info_search_returns_nothing(db: ToolWOZDB) -> None:
    task = restaurant_task(fail_info={"food": "thai", "area": "centre", "pricerange": "cheap"})
    assert served_name(db, task, "restaurant", {"food": "thai", "area": "centre"}) is None
    assert served_name(db, task, "restaurant", {"food": "thai", "pricerange": "cheap"}) is None
    assert served_name(db, task, "restaurant", {"area": "centre", "pricerange": "cheap"}) is not None


def test_train_query_is_inclusive_at_both_ends(db: ToolWOZDB) -> None:
    task = make_task("t", {"hotel": DomainGoal(info={"area": "north"})})
    base = {"departure": "cambridge", "destination": "norwich", "day": "friday"}
    assert served_name(db, task, "train", {**base, "leaveAt": "9:36"}) == "TR8056"
    assert served_name(db, task, "train", {**base, "arriveBy": "06:55"}) == "TR2534"
    assert served_name(db, task, "train", {**base, "arriveBy": "06:54"}) is None


def test_train_after_midnight_arrival_counts_as_next_day(db: ToolWOZDB) -> None:
    task = make_task("t", {"hotel": DomainGoal(info={"area": "north"})})
    args = {
        "departure": "cambridge",
        "destination": "norwich",
        "day": "friday",
        "leaveAt": "23:30",
        "arriveBy": "23:59",
    }
    assert served_name(db, task, "train", args) is None
    assert served_name(db, task, "train", {**args, "arriveBy": "24:55"}) == "TR7179"


def test_unparseable_train_time_matches_nothing(db: ToolWOZDB) -> None:
    task = make_task("t", {"hotel": DomainGoal(info={"area": "north"})})
    assert served_name(db, task, "train", {"leaveAt": "after lunch"}) is None


# --- booking -------------------------------------------------------------------------------------------------------


def booking(db: ToolWOZDB, task: Task, domain: str, args: dict[str, object]) -> dict[str, object]:
    plan = TaskPlan.compile(task, db).domains[domain]
    return json.loads(serve_booking(plan, normalize_args(args)).content)


def test_booking_succeeds_with_the_dialogue_reference(db: ToolWOZDB) -> None:
    args = {"name": "Zizzi Cambridge", "time": "7:00 pm", "day": "Friday", "people": 3}
    assert booking(db, restaurant_task(), "restaurant", args) == {
        "success": True,
        "reference": "REF42",
        "name": "zizzi cambridge",
    }


@pytest.mark.parametrize(
    "args",
    [
        {"name": "zizzi cambridge", "time": "19:00", "day": "friday", "people": "4"},
        {"name": "zizzi cambridge", "time": "19:00", "day": "friday"},
        {"name": "ask restaurant", "time": "19:00", "day": "friday", "people": "3"},
    ],
)
def test_booking_fails_unless_goal_parameters_are_contained(db: ToolWOZDB, args: dict[str, object]) -> None:
    assert booking(db, restaurant_task(), "restaurant", args) == {"success": False}


def test_booking_without_booking_goal_fails(db: ToolWOZDB) -> None:
    assert booking(db, restaurant_task(booked=None), "restaurant", {"name": "zizzi cambridge", "people": "3"}) == {
        "success": False
    }
    assert booking(db, restaurant_task(), "hotel", {"name": "acorn guest house"}) == {"success": False}


def test_fail_book_attempt_fails_naturally(db: ToolWOZDB) -> None:
    goal = DomainGoal(
        info={"area": "north"}, book={"stay": "2", "day": "monday", "people": "1"}, fail_book={"day": "sunday"}
    )
    task = make_task("t", {"hotel": goal}, booked={"hotel": {"name": "acorn guest house", "reference": "H1"}})
    base = {"name": "acorn guest house", "stay": "2", "people": "1"}
    assert booking(db, task, "hotel", {**base, "day": "sunday"}) == {"success": False}
    assert booking(db, task, "hotel", {**base, "day": "monday"})["success"] is True


def test_train_booking_matches_train_id_case_insensitively(db: ToolWOZDB) -> None:
    goal = DomainGoal(info={"departure": "cambridge", "destination": "norwich", "day": "friday"}, book={"people": "2"})
    task = make_task("t", {"train": goal}, booked={"train": {"trainID": "TR8056", "reference": "T9"}})
    assert booking(db, task, "train", {"trainID": "tr8056", "people": 2}) == {
        "success": True,
        "reference": "T9",
        "trainID": "TR8056",
    }
