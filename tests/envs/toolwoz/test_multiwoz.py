"""Reading MultiWOZ dialogues into ToolWOZ tasks (hand-made fixture + the real split lists)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josh.envs.toolwoz.multiwoz import (
    OFFICIAL_TEST_SIZE,
    DataFormatError,
    dialogue_to_task,
    goal_text,
    load_multiwoz,
    read_id_list,
    split_ids,
)
from josh.envs.toolwoz.task import details_of

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "multiwoz"


@pytest.fixture(scope="module")
def splits():
    return load_multiwoz(FIXTURE)


def _by_id(splits):
    return {t.id: t for tasks in splits.values() for t in tasks}


def test_universe_excludes_taxi_police_hospital(splits):
    ids = _by_id(splits)
    assert "MUL0003" not in ids and "SNG0006" not in ids
    assert set(ids) == {"SNG0001", "MUL0002", "PMUL0004", "SNG0005", "MUL0007"}


def test_split_membership(splits):
    assert [t.id for t in splits["train"]] == ["MUL0007", "SNG0001"]
    assert [t.id for t in splits["val"]] == ["PMUL0004"]
    assert [t.id for t in splits["full_test"]] == ["MUL0002", "SNG0005"]
    assert splits["test"] == splits["full_test"]
    assert {t.split for t in splits["full_test"]} == {"test"}


def test_single_domain_booking(splits):
    task = _by_id(splits)["SNG0001"]
    assert [(g.name, g.parameters) for g in task.goals] == [
        ("search_restaurant", {"food": "thai", "area": "north"}),
        ("book_restaurant", {"time": "19:30", "day": "friday", "people": "2", "name": "the juniper kitchen"}),
    ]
    assert task.goals[1].expected_return == {"name": "the juniper kitchen", "reference": "QX7R2LM0"}
    assert details_of(task).goal["restaurant"].reqt == ["phone"]


def test_booked_entity_from_second_to_last_turn_takes_the_last_entry(splits):
    task = _by_id(splits)["MUL0002"]
    booked = details_of(task).booked
    assert booked["hotel"]["name"] == "alder house"
    assert booked["train"] == {"trainID": "TR4821", "reference": "TT0P9ABC"}
    assert [g.name for g in task.goals] == ["search_hotel", "book_hotel", "search_train", "book_train"]
    assert "pre_invalid" not in task.goals[1].parameters


def test_fail_info_and_fail_book_are_kept(splits):
    details = details_of(_by_id(splits)["PMUL0004"])
    assert details.goal["hotel"].fail_info == {"area": "west", "pricerange": "cheap"}
    assert details.goal["hotel"].fail_book == {"day": "saturday"}
    assert details.booked["hotel"]["name"] == "elmfield inn"


def test_no_booking_goal_when_nothing_was_booked(splits):
    task = _by_id(splits)["SNG0005"]
    assert [g.name for g in task.goals] == ["search_restaurant"]


def test_booked_entry_without_name_takes_it_from_the_belief_state(splits):
    task = _by_id(splits)["MUL0007"]
    assert task.goals[-1].parameters["name"] == "the saffron larder"


def test_goal_text_and_transcript(splits):
    task = _by_id(splits)["SNG0001"]
    assert task.user_goal.startswith("You fancy a meal at a thai place in the north.")
    assert "<" not in task.user_goal and "span" not in task.user_goal
    assert [m.role for m in task.transcript] == ["user", "assistant", "user", "assistant"]
    assert task.transcript[0].content == "Hi, is there a thai restaurant up in the north?"


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30), max_size=5))
def test_goal_text_removes_every_tag(sentences):
    marked = [f"<span class='emphasis'>{s}</span>" for s in sentences]
    text = goal_text(marked)
    assert "<" not in text and ">" not in text
    assert text == goal_text(sentences)


def test_delex_supplies_goal_text_and_zip_layout_loads(tmp_path):
    data = json.loads((FIXTURE / "data.json").read_text())
    delex = json.loads(json.dumps(data))
    delex["SNG0001.json"]["goal"]["message"] = ["Delex wording of the goal."]
    archive = tmp_path / "dataset.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data/data.json", json.dumps(data))
        zf.writestr("data/delex.json", json.dumps(delex))
        zf.writestr("data/ground_truth_apis.json", "{}")
    for name in ("testListFile.json", "valListFile.json"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    splits = load_multiwoz(archive)
    task = _by_id(splits)["SNG0001"]
    assert task.user_goal == "Delex wording of the goal."
    assert task.transcript[0].content.startswith("Hi, is there")


def test_corrupt_record_names_file_and_id(tmp_path):
    data = json.loads((FIXTURE / "data.json").read_text())
    data["SNG0001.json"]["goal"]["restaurant"]["info"] = ["not", "a", "dict"]
    (tmp_path / "data.json").write_text(json.dumps(data))
    for name in ("testListFile.json", "valListFile.json"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    with pytest.raises(DataFormatError, match=r"data\.json.*SNG0001"):
        load_multiwoz(tmp_path)


def test_unreadable_json_and_missing_lists(tmp_path):
    (tmp_path / "data.json").write_text("{ not json")
    with pytest.raises(DataFormatError, match="data.json"):
        load_multiwoz(tmp_path)
    (tmp_path / "data.json").write_text("{}")
    with pytest.raises(DataFormatError, match="split lists"):
        load_multiwoz(tmp_path)


def test_dialogue_without_goal_is_an_error():
    with pytest.raises(DataFormatError, match="X1"):
        dialogue_to_task("X1.json", {"log": []})


def test_official_test_split_from_the_real_lists(shared_data):
    test_list = read_id_list(shared_data / "toolwoz" / "testListFile.json")
    val_list = read_id_list(shared_data / "toolwoz" / "valListFile.json")
    assert len(test_list) == len(val_list) == 1000 and not set(test_list) & set(val_list)
    dropped = set(test_list[::9])
    universe = [i for i in [*test_list, *val_list, "MUL9998.json", "SNG9999.json"] if i not in dropped]
    ids = split_ids(universe, test_list, val_list)
    assert ids["full_test"] == sorted(set(test_list) - dropped)
    assert ids["test"] == ids["full_test"][:OFFICIAL_TEST_SIZE]
    assert not any(i.startswith("SNG") for i in ids["test"])
    assert ids["test"][0].startswith("MUL") and ids["test"][-1].startswith("PMUL")
    assert ids["train"] == ["MUL9998.json", "SNG9999.json"]
    assert ids["val"] == sorted(val_list)
