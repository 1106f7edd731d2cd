"""The seeded goal generator: reproducible, and every task it makes is solvable on its database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.envs.toolwoz.generator import GoalGenerator, check_task, load_db, matches
from josh.envs.toolwoz.mini import make_db
from josh.envs.toolwoz.task import details_of, make_task

MINI_DB = make_db(0)


def test_same_seed_same_tasks_other_seed_other_tasks():
    first = GoalGenerator(MINI_DB, seed=3).tasks(20)
    again = GoalGenerator(MINI_DB, seed=3).tasks(20)
    other = GoalGenerator(MINI_DB, seed=4).tasks(20)
    assert [t.model_dump() for t in first] == [t.model_dump() for t in again]
    assert [t.model_dump() for t in first] != [t.model_dump() for t in other]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_every_generated_task_is_solvable(seed):
    for task in GoalGenerator(MINI_DB, seed=seed).tasks(15):
        assert check_task(task, MINI_DB) == []
        details = details_of(task)
        for domain, spec in details.goal.items():
            changed = {k: v for k, v in spec.fail_info.items() if spec.info.get(k) != v}
            assert not spec.fail_info or changed, "fail_info must differ from info"
            assert set(spec.fail_book) <= set(spec.book)
            assert all(spec.fail_book[k] != spec.book[k] for k in spec.fail_book)
            if domain in details.booked:
                assert len(details.booked[domain]["reference"]) == 8
                assert details.booked[domain]["reference"].isalnum()


def test_mix_of_domains_bookings_and_failures():
    tasks = GoalGenerator(MINI_DB, seed=0).tasks(300)
    sizes = [len(details_of(t).domains) for t in tasks]
    assert 0.6 < sizes.count(1) / len(tasks) < 0.8 and 3 in sizes
    specs = [s for t in tasks for s in details_of(t).goal.values()]
    assert sum(bool(s.fail_info) for s in specs) >= 10
    assert sum(bool(s.fail_book) for s in specs) >= 10
    assert {g.name for t in tasks for g in t.goals} == {
        "search_restaurant", "search_hotel", "search_attraction", "search_train",
        "book_restaurant", "book_hotel", "book_train",
    }  # fmt: skip
    assert len({t.user_goal.split(".")[0] for t in tasks}) >= 8


def test_train_goal_books_the_train_a_traveller_would_pick():
    for task in GoalGenerator(MINI_DB, seed=11).tasks(200):
        details = details_of(task)
        if "train" not in details.booked:
            continue
        info = details.goal["train"].info
        found = matches(MINI_DB["train"], info)
        booked = next(r for r in found if r["trainID"] == details.booked["train"]["trainID"])
        if "leaveAt" in info:
            assert booked["leaveAt"] == min(r["leaveAt"] for r in found)
        else:
            assert booked["arriveBy"] == max(r["arriveBy"] for r in found)


def test_check_task_reports_an_unsolvable_task():
    from josh.envs.toolwoz.task import DomainGoal

    broken = make_task(
        "bad",
        {"hotel": DomainGoal(info={"area": "north"}, book={"people": "2", "day": "friday", "stay": "1"})},
        booked={"hotel": {"name": "no such hotel", "reference": "AAAAAAAA"}},
    )
    assert any("not in the database" in p for p in check_task(broken, MINI_DB))
    impossible = make_task("bad2", {"restaurant": DomainGoal(info={"food": "martian"})})
    assert any("no restaurant row" in p for p in check_task(impossible, MINI_DB))


def test_generator_over_the_real_multiwoz_db(shared_data):
    db = load_db(shared_data / "multiwoz" / "db")
    tasks = GoalGenerator(db, seed=5).tasks(150)
    assert [p for t in tasks for p in check_task(t, db)] == []


def test_load_db_errors(tmp_path):
    with pytest.raises(ValueError, match="no restaurant"):
        load_db(tmp_path)
    (tmp_path / "hotel_db.json").write_text("{oops")
    with pytest.raises(ValueError, match="hotel_db.json"):
        load_db(tmp_path)
