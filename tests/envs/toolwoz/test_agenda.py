"""The agenda (rule-based) ToolWOZ user: piecemeal reveal, fail-first goals, booking fall-back, ending, statelessness."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josh.core.user import UserTurn
from josh.envs.toolwoz.agenda import AgendaUser
from josh.envs.toolwoz.task import DomainGoal, make_task
from josh.types import Message, Task, assistant, user
from josh.users import make_user


def restaurant_task(task_id: str = "agenda_rest") -> Task:
    goal = DomainGoal(
        info={"food": "italian", "area": "centre", "pricerange": "moderate"},
        fail_info={"food": "corsican", "area": "centre", "pricerange": "moderate"},
        book={"time": "18:30", "day": "friday", "people": "3"},
        fail_book={"day": "saturday"},
        reqt=["phone"],
    )
    return make_task(
        task_id, {"restaurant": goal}, booked={"restaurant": {"name": "pizza express", "reference": "RF12X9"}}
    )


def two_domain_task() -> Task:
    hotel = DomainGoal(info={"area": "north", "type": "guesthouse"}, book={"stay": "2", "day": "monday", "people": "2"})
    train = DomainGoal(info={"departure": "ely", "destination": "cambridge", "day": "monday"}, reqt=["price"])
    return make_task("agenda_two", {"hotel": hotel, "train": train})


def drive(task: Task, replies: list[str], agenda: AgendaUser | None = None) -> tuple[list[UserTurn], list[Message]]:
    """Play the agenda against a fixed list of agent replies; stops when the user ends."""
    agenda = agenda or AgendaUser()
    transcript: list[Message] = []
    said: list[UserTurn] = []
    for reply in [*replies, None]:
        turn = agenda.respond(task, transcript)
        said.append(turn)
        transcript.append(user(turn.text))
        if turn.done or reply is None:
            break
        transcript.append(assistant(reply))
    return said, transcript


def test_opening_names_the_domain_and_at_most_two_constraints() -> None:
    first = AgendaUser().respond(restaurant_task(), [])
    values = ["corsican", "centre", "moderate"]
    assert "restaurant" in first.text.lower()
    assert 1 <= sum(v in first.text for v in values) <= 2
    assert not first.done


def test_fail_info_first_then_info_after_no_match() -> None:
    said, _ = drive(
        restaurant_task(),
        ["What price range are you looking for?", "I'm sorry, there is no corsican restaurant in the centre."],
    )
    assert "corsican" in said[0].text and "italian" not in said[0].text
    assert "moderate" in said[1].text
    assert "italian" in said[2].text and "corsican" not in said[2].text


def test_answers_the_asked_slot() -> None:
    said, _ = drive(restaurant_task(), ["Which price range would you like?"])
    assert "moderate" in said[1].text
    assert "18:30" not in said[1].text


def test_reveals_constraints_piecemeal_without_questions() -> None:
    said, _ = drive(restaurant_task(), ["Okay."])
    assert "moderate" not in said[0].text
    assert "moderate" in said[1].text


def test_fail_book_first_then_book_then_goodbye() -> None:
    said, _ = drive(
        restaurant_task(),
        [
            "What price range?",
            "Sorry, nothing matches corsican food.",
            "I found pizza express, a moderate italian restaurant in the centre.",
            "I'm sorry, the booking failed.",
            "Done! Your reference number is RF12X9.",
        ],
    )
    booking, retry, end = said[3].text, said[4].text, said[5]
    assert all(v in booking for v in ("saturday", "18:30", "3")) and "friday" not in booking
    assert "phone number" in booking
    assert "friday" in retry
    assert end.done and not said[4].done


def test_rejects_an_offer_that_is_not_the_goal_entity() -> None:
    said, _ = drive(restaurant_task(), ["Which price range?", "Sorry, none.", "I found the golden wok, a nice place."])
    assert not said[3].done
    assert "italian" in said[3].text and "book" not in said[3].text.lower()


def test_no_booking_goal_skips_the_booking_and_moves_on() -> None:
    said, _ = drive(two_domain_task(), ["I found the avalon.", "Sorry, I couldn't book that."])
    assert "stay" in said[0].text
    assert "2 nights" in said[1].text or "for 2" in said[1].text
    assert "train" in said[2].text.lower() and not said[2].done


def test_requested_attributes_then_next_domain_then_goodbye() -> None:
    said, _ = drive(
        two_domain_task(),
        [
            "Which area?",
            "I found the avalon, a guesthouse in the north.",
            "Booked! Reference number ABC12345.",
            "Which day?",
            "Train TR1234 leaves ely at 09:00.",
            "It costs 4.40 pounds.",
        ],
    )
    assert "price" in said[5].text
    assert said[-1].done and len(said) == 7


def test_gives_up_after_patience_replies_without_progress() -> None:
    patience = 2
    said, _ = drive(restaurant_task(), ["Hmm."] * 20, AgendaUser(patience=patience))
    assert said[-1].done
    assert len(said) <= 2 + patience + 3


def test_same_transcript_same_reply_whoever_asks() -> None:
    task = restaurant_task()
    said, transcript = drive(task, ["What price range?", "Sorry, no corsican food.", "I found pizza express."])
    users = [i for i, m in enumerate(transcript) if m.role == "user"]
    for turn, index in zip(said, users, strict=True):
        prefix = transcript[:index]
        assert AgendaUser().respond(task, prefix) == turn
        assert AgendaUser().respond(task, prefix) == AgendaUser().respond(task, list(prefix))


def test_wording_varies_across_tasks_but_keeps_values() -> None:
    openings = {AgendaUser().respond(restaurant_task(f"t{i}"), []).text for i in range(12)}
    assert len(openings) > 1
    assert all("corsican" in text for text in openings)


async def test_reply_is_the_async_form_and_registered() -> None:
    task = restaurant_task()
    agenda = make_user("agenda", chunk=1)
    assert isinstance(agenda, AgendaUser)
    assert (await agenda.reply(task, [])) == agenda.respond(task, [])
    with pytest.raises(ValueError):
        make_user("agenda", chunk=0)
    with pytest.raises(ValueError):
        make_user("agenda", unknown=True)


def test_rejects_a_task_of_another_environment() -> None:
    with pytest.raises(ValueError, match="ToolWOZ"):
        AgendaUser().respond(Task(id="r1", env="retail"), [])


_REPLIES = st.sampled_from(
    [
        "",
        "Okay.",
        "Which area would you like?",
        "What price range and what type of food?",
        "How many people, which day and what time?",
        "Sorry, there is nothing like that.",
        "I found pizza express in the centre.",
        "I found the avalon.",
        "Your booking is confirmed, reference RF12X9.",
        "Booked, the reference number is ABC12345.",
        "Do you need parking?",
        "Train TR1234 leaves at 09:00. Would you like tickets?",
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies=st.lists(_REPLIES, min_size=60, max_size=60), two=st.booleans(), patience=st.integers(1, 4))
def test_any_agent_behaviour_ends_the_conversation(replies: list[str], two: bool, patience: int) -> None:
    task = two_domain_task() if two else restaurant_task()
    said, _ = drive(task, replies, AgendaUser(patience=patience))
    assert said[-1].done, "the agenda user must end within 60 agent replies"
    assert all(turn.text.strip() for turn in said)
