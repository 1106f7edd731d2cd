"""Every airline tool's preconditions, effects, return texts and error texts, on a tiny database."""

from __future__ import annotations

import json
from typing import Any

import pytest

from josh.envs.airline import AirlineEnv, AirlineState
from josh.types import ErrorCategory, ToolCall
from tests.airline_data import ANN, BO, write_airline


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> AirlineEnv:
    return AirlineEnv(write_airline(tmp_path_factory.mktemp("airline")))


@pytest.fixture
def state(env: AirlineEnv) -> AirlineState:
    return env.reset(env.tasks("test")[0])


def call(env: AirlineEnv, state: AirlineState, name: str, **arguments: Any) -> str:
    return env.call(state, ToolCall(name=name, arguments=arguments)).content


def fails(env: AirlineEnv, state: AirlineState, name: str, **arguments: Any) -> str:
    """The error text of a call that must change nothing."""
    before = state.data_hash()
    result = env.call(state, ToolCall(name=name, arguments=arguments))
    assert result.error is not None and result.content.startswith("Error: ")
    assert state.data_hash() == before
    return result.content


def legs(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"flight_number": number, "date": date} for number, date in pairs]


def paying(*methods: tuple[str, float]) -> list[dict[str, Any]]:
    return [{"payment_id": method, "amount": amount} for method, amount in methods]


def update_flights(env: AirlineEnv, state: AirlineState, cabin: str, flights: list, payment_id: str) -> dict[str, Any]:
    """Reservation AAA111 moved to ``flights`` in ``cabin``: the updated reservation."""
    arguments = {"reservation_id": "AAA111", "cabin": cabin, "flights": flights, "payment_id": payment_id}
    return json.loads(call(env, state, "update_reservation_flights", **arguments))


def booking(**changes: Any) -> dict[str, Any]:
    """Ann books HAT001 + HAT002 on May 10 in economy, one passenger, insurance, one paid bag: 100+100+30+50."""
    return {
        "user_id": ANN,
        "origin": "JFK",
        "destination": "SFO",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": legs(("HAT001", "2024-05-10"), ("HAT002", "2024-05-10")),
        "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1980-01-01"}],
        "payment_methods": paying(("certificate_1", 100), ("gift_card_1", 180)),
        "total_baggages": 1,
        "nonfree_baggages": 1,
        "insurance": "yes",
        **changes,
    }


def test_book_reservation_prices_charges_and_files_it(env: AirlineEnv, state: AirlineState) -> None:
    reservation = json.loads(call(env, state, "book_reservation", **booking()))
    assert reservation["reservation_id"] == "HATHAT" and reservation["created_at"] == "2024-05-15T15:00:00"
    assert reservation["payment_history"] == booking()["payment_methods"]
    first = reservation["flights"][0]
    assert first == {
        "flight_number": "HAT001",
        "date": "2024-05-10",
        "price": 100,
        "origin": "JFK",
        "destination": "ORD",
    }
    user = state.user(ANN)
    assert user is not None and "certificate_1" not in user["payment_methods"]
    assert user["payment_methods"]["gift_card_1"]["amount"] == 320 and user["reservations"][-1] == "HATHAT"
    assert state.reservation("HATHAT") == reservation
    assert env.db.users[ANN]["payment_methods"]["gift_card_1"]["amount"] == 500  # the shared data is untouched


def test_booking_ids_continue_after_the_upstream_three(env: AirlineEnv, state: AirlineState) -> None:
    pay = paying(("credit_card_1", 280))
    ids = [
        json.loads(call(env, state, "book_reservation", **booking(payment_methods=pay)))["reservation_id"]
        for _ in range(4)
    ]
    assert ids == ["HATHAT", "HATHAU", "HATHAV", "HATHAW"]
    assert state.user(ANN)["reservations"][-4:] == ids  # type: ignore[index]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"user_id": "nobody"}, "Error: user not found"),
        ({"flights": legs(("HAT999", "2024-05-10"))}, "Error: flight HAT999 not found"),
        ({"flights": legs(("HAT001", "2024-05-20"))}, "Error: flight HAT001 not found on date 2024-05-20"),
        ({"flights": legs(("HAT001", "2024-05-11"))}, "Error: flight HAT001 not available on date 2024-05-11"),
        ({"flights": legs(("HAT001", "2024-05-12"))}, "Error: flight HAT001 not available on date 2024-05-12"),
        (
            {
                "cabin": "business",
                "flights": legs(("HAT003", "2024-05-10")),
                "passengers": [{"first_name": "A", "last_name": "B", "dob": "x"}] * 2,
            },
            "Error: not enough seats on flight HAT003",
        ),
        ({"payment_methods": paying(("gift_card_2", 280))}, "Error: payment method gift_card_2 not found"),
        (
            {"payment_methods": paying(("certificate_1", 150), ("gift_card_1", 130))},
            "Error: not enough balance in payment method certificate_1",
        ),
        (
            {"payment_methods": paying(("credit_card_1", 279))},
            "Error: payment amount does not add up, total price is 280, but paid 279",
        ),
        (
            {"payment_methods": paying(("credit_card_1", 279.5))},
            "Error: payment amount does not add up, total price is 280, but paid 279.5",
        ),
        (
            {"payment_methods": paying(("certificate_1", 50), ("certificate_1", 50), ("gift_card_1", 180))},
            "Error: 'certificate_1'",
        ),
    ],
)
def test_book_reservation_errors_change_nothing(
    env: AirlineEnv, state: AirlineState, changes: dict, error: str
) -> None:
    assert fails(env, state, "book_reservation", **booking(**changes)) == error


def test_book_reservation_checks_in_upstream_order(env: AirlineEnv, state: AirlineState) -> None:
    """A bad flight is reported before a bad payment, a missing method before the sum."""
    bad = booking(flights=legs(("HAT999", "2024-05-10")), payment_methods=paying(("nope", 1)))
    assert fails(env, state, "book_reservation", **bad) == "Error: flight HAT999 not found"
    bad = booking(payment_methods=paying(("nope", 1)))
    assert fails(env, state, "book_reservation", **bad) == "Error: payment method nope not found"


def test_cancel_reservation_refunds_every_payment(env: AirlineEnv, state: AirlineState) -> None:
    assert fails(env, state, "cancel_reservation", reservation_id="ZZZ999") == "Error: reservation not found"
    out = json.loads(call(env, state, "cancel_reservation", reservation_id="BBB222"))
    assert out["status"] == "cancelled"
    assert out["payment_history"] == [
        {"payment_id": "gift_card_1", "amount": 250},
        {"payment_id": "gift_card_1", "amount": -250},
    ]
    assert state.user(ANN)["payment_methods"]["gift_card_1"]["amount"] == 500  # type: ignore[index]
    again = json.loads(call(env, state, "cancel_reservation", reservation_id="BBB222"))
    assert [p["amount"] for p in again["payment_history"]] == [250, -250, -250, 250]


def test_update_flights_keeps_booked_prices_and_charges_the_difference(env: AirlineEnv, state: AirlineState) -> None:
    flights = legs(("HAT001", "2024-05-10"), ("HAT005", "2024-05-10"))
    out = update_flights(env, state, "economy", flights, "gift_card_1")
    assert [f["price"] for f in out["flights"]] == [90, 100]  # kept leg at its booked 90, new leg at today's 100
    assert out["flights"][1]["origin"] == "ORD" and out["payment_history"][-1] == {
        "payment_id": "gift_card_1",
        "amount": 40,
    }
    assert state.user(ANN)["payment_methods"]["gift_card_1"]["amount"] == 460  # type: ignore[index]


def test_update_flights_cabin_change_reprices_every_leg_and_keeps_the_cabin_field(
    env: AirlineEnv, state: AirlineState
) -> None:
    flights = legs(("HAT001", "2024-05-10"), ("HAT002", "2024-05-10"))
    out = update_flights(env, state, "basic_economy", flights, "gift_card_1")
    assert [f["price"] for f in out["flights"]] == [50, 50] and out["cabin"] == "economy"  # upstream never sets cabin
    assert out["payment_history"][-1]["amount"] == -140
    assert state.user(ANN)["payment_methods"]["gift_card_1"]["amount"] == 640  # type: ignore[index]
    history = len(out["payment_history"])
    same = update_flights(env, state, "economy", flights, "credit_card_1")
    assert len(same["payment_history"]) == history  # the same legs at their booked prices: nothing to record


@pytest.mark.parametrize(
    ("cabin", "flights", "payment", "error"),
    [
        ("economy", legs(("HAT999", "2024-05-10")), "gift_card_1", "flight HAT999 not found"),
        ("economy", legs(("HAT001", "2024-05-20")), "gift_card_1", "flight HAT001 not found on date 2024-05-20"),
        ("economy", legs(("HAT001", "2024-05-11")), "gift_card_1", "flight HAT001 not available on date 2024-05-11"),
        ("business", legs(("HAT003", "2024-05-10")), "credit_card_1", "not enough seats on flight HAT003"),
        ("economy", legs(("HAT003", "2024-05-09")), "gift_card_2", "payment method not found"),
        (
            "economy",
            legs(("HAT003", "2024-05-09")),
            "certificate_1",
            "certificate cannot be used to update reservation",
        ),
        (
            "business",
            legs(("HAT001", "2024-05-10"), ("HAT002", "2024-05-10")),
            "gift_card_1",
            "gift card balance is not enough",
        ),
    ],
)
def test_update_flights_errors(
    env: AirlineEnv, state: AirlineState, cabin: str, flights: list, payment: str, error: str
) -> None:
    arguments = {"reservation_id": "AAA111", "cabin": cabin, "flights": flights, "payment_id": payment}
    assert fails(env, state, "update_reservation_flights", **arguments) == f"Error: {error}"
    missing = {**arguments, "reservation_id": "ZZZ999"}
    assert fails(env, state, "update_reservation_flights", **missing) == "Error: reservation not found"


def test_update_baggages_charges_only_added_paid_bags(env: AirlineEnv, state: AirlineState) -> None:
    def update(total: int, nonfree: int, payment: str) -> dict[str, Any]:
        bags = {"total_baggages": total, "nonfree_baggages": nonfree, "payment_id": payment}
        return json.loads(call(env, state, "update_reservation_baggages", reservation_id="AAA111", **bags))

    out = update(3, 3, "gift_card_1")
    assert (out["total_baggages"], out["nonfree_baggages"]) == (3, 3)
    assert out["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": 100}
    fewer = update(1, 0, "credit_card_1")
    assert fewer["nonfree_baggages"] == 0 and len(fewer["payment_history"]) == len(out["payment_history"])
    assert state.user(ANN)["payment_methods"]["gift_card_1"]["amount"] == 400  # type: ignore[index]


@pytest.mark.parametrize(
    ("reservation", "payment", "error"),
    [
        ("ZZZ999", "gift_card_2", "reservation not found"),
        ("CCC333", "gift_card_1", "payment method not found"),
        ("CCC333", "gift_card_2", "gift card balance is not enough"),
        ("AAA111", "certificate_1", "certificate cannot be used to update reservation"),
    ],
)
def test_update_baggages_errors(
    env: AirlineEnv, state: AirlineState, reservation: str, payment: str, error: str
) -> None:
    bags = {"total_baggages": 2, "nonfree_baggages": 2, "payment_id": payment}
    assert fails(env, state, "update_reservation_baggages", reservation_id=reservation, **bags) == f"Error: {error}"


def test_update_passengers_keeps_their_number(env: AirlineEnv, state: AirlineState) -> None:
    one = [{"first_name": "Zed", "last_name": "Ray", "dob": "2000-02-02"}]
    assert (
        fails(env, state, "update_reservation_passengers", reservation_id="AAA111", passengers=one)
        == "Error: number of passengers does not match"
    )
    assert (
        fails(env, state, "update_reservation_passengers", reservation_id="ZZZ999", passengers=one)
        == "Error: reservation not found"
    )
    out = json.loads(call(env, state, "update_reservation_passengers", reservation_id="BBB222", passengers=one))
    assert out["passengers"] == one and state.reservation("BBB222")["passengers"] == one  # type: ignore[index]


def test_send_certificate_ids_and_text(env: AirlineEnv, state: AirlineState) -> None:
    assert fails(env, state, "send_certificate", user_id="nobody", amount=100) == "Error: user not found"
    texts = [call(env, state, "send_certificate", user_id=BO, amount=amount) for amount in (100, 50, 150.5, 20)]
    assert texts[0] == f"Certificate certificate_3221322 added to user {BO} with amount 100."
    assert texts[2] == f"Certificate certificate_3221324 added to user {BO} with amount 150.5."
    assert texts[3].startswith("Certificate certificate_3221325 ")
    method = state.user(BO)["payment_methods"]["certificate_3221323"]  # type: ignore[index]
    assert method == {"source": "certificate", "amount": 50, "id": "certificate_3221323"}


def test_lookups(env: AirlineEnv, state: AirlineState) -> None:
    assert json.loads(call(env, state, "get_user_details", user_id=BO))["membership"] == "regular"
    assert call(env, state, "get_user_details", user_id="nobody") == "Error: user not found"
    assert json.loads(call(env, state, "get_reservation_details", reservation_id="CCC333"))["cabin"] == "basic_economy"
    assert (
        call(env, state, "get_reservation_details", reservation_id="ZZZ999") == "Error: user not found"
    )  # upstream text
    airports = json.loads(call(env, state, "list_all_airports"))
    assert len(airports) == 20 and airports["LGA"] == "LaGuardia"
    assert call(env, state, "calculate", expression="(100 + 30) * 2 / 3") == "86.67"
    assert call(env, state, "think", thought="plan") == ""


def test_search_direct_lists_available_dates_only(env: AirlineEnv, state: AirlineState) -> None:
    found = json.loads(call(env, state, "search_direct_flight", origin="JFK", destination="ORD", date="2024-05-10"))
    assert [f["flight_number"] for f in found] == ["HAT001", "HAT004"]
    assert set(found[0]) == {
        "flight_number", "origin", "destination", "scheduled_departure_time_est", "scheduled_arrival_time_est",
        "status", "available_seats", "prices",
    }  # fmt: skip
    assert call(env, state, "search_direct_flight", origin="JFK", destination="ORD", date="2024-05-11") == "[]"


def test_search_onestop_connections_and_the_overnight_date(env: AirlineEnv, state: AirlineState) -> None:
    def pairs(date: str) -> list[tuple[str, str, str, str]]:
        found = json.loads(call(env, state, "search_onestop_flight", origin="JFK", destination="SFO", date=date))
        return [(a["flight_number"], a["date"], b["flight_number"], b["date"]) for a, b in found]

    assert pairs("2024-05-10") == [
        ("HAT001", "2024-05-10", "HAT002", "2024-05-10")
    ]  # HAT005 leaves before HAT001 lands
    assert pairs("2024-05-09") == [
        ("HAT001", "2024-05-09", "HAT002", "2024-05-09"),
        ("HAT004", "2024-05-09", "HAT002", "2024-05-10"),
        ("HAT004", "2024-05-09", "HAT005", "2024-05-10"),
    ]
    assert pairs("2024-05-01") == [("HAT001", "2024-05-01", "HAT002", "2024-05-01")]  # "2024-05-2" is no date
    overnight = json.loads(
        call(env, state, "search_onestop_flight", origin="JFK", destination="SFO", date="2024-05-09")
    )[1]
    assert overnight[1]["available_seats"]["economy"] == 3  # the second leg shows the departure date's seats
    bad = call(env, state, "search_onestop_flight", origin="JFK", destination="SFO", date="tomorrow")
    assert bad == "Error: invalid literal for int() with base 10: 'ow'"


@pytest.mark.parametrize(
    ("name", "arguments", "error", "category"),
    [
        (
            "get_user_details",
            {"user": ANN},
            "Error: get_user_details() got an unexpected keyword argument 'user'",
            ErrorCategory.UNKNOWN_ARGUMENT,
        ),
        (
            "cancel_reservation",
            {},
            "Error: cancel_reservation() missing required argument(s): 'reservation_id'",
            ErrorCategory.MALFORMED,
        ),
        (
            "book_reservation",
            booking(cabin="first"),
            "Error: book_reservation() argument 'cabin' must be one of basic_economy, economy, business",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "book_reservation",
            booking(insurance=True),
            "Error: book_reservation() argument 'insurance' must be a string",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "book_reservation",
            booking(total_baggages="2"),
            "Error: book_reservation() argument 'total_baggages' must be an integer",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "book_reservation",
            booking(flights=[{"flight_number": "HAT001"}]),
            "Error: book_reservation() argument 'flights[0]' lacks the key 'date'",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "book_reservation",
            booking(payment_methods=[{"payment_id": "gift_card_1", "amount": "280"}]),
            "Error: book_reservation() argument 'payment_methods[0].amount' must be a number",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "update_reservation_passengers",
            {"reservation_id": "AAA111", "passengers": "two"},
            "Error: update_reservation_passengers() argument 'passengers' must be a list",
            ErrorCategory.INVALID_VALUE,
        ),
        (
            "send_certificate",
            {"user_id": BO, "amount": True},
            "Error: send_certificate() argument 'amount' must be a number",
            ErrorCategory.INVALID_VALUE,
        ),
    ],
)
def test_arguments_are_checked_before_the_tool_runs(env, state, name, arguments, error, category) -> None:
    result = env.call(state, ToolCall(name=name, arguments=arguments))
    assert (result.content, result.error) == (error, category) and state.data_hash() == env.reset(
        state.task
    ).data_hash()


def test_unknown_tools_raw_arguments_and_transfer(env: AirlineEnv, state: AirlineState) -> None:
    unknown = env.call(state, ToolCall(name="upgrade_seat", arguments={}))
    assert (unknown.content, unknown.error) == ("Unknown action upgrade_seat", ErrorCategory.UNKNOWN_TOOL)
    raw = env.call(state, ToolCall(name="cancel_reservation", arguments="AAA111"))
    assert raw.error == ErrorCategory.MALFORMED
    done = env.call(state, ToolCall(name="transfer_to_human_agents", arguments={"summary": "wants a refund"}))
    assert done.terminal and state.terminated and done.content == "Transfer successful"
    late = env.call(state, ToolCall(name="cancel_reservation", arguments={"reservation_id": "AAA111"}))
    assert late.error == ErrorCategory.TOOL_ERROR and state.reservation("AAA111")["payment_history"][-1]["amount"] > 0  # type: ignore[index]


def test_extra_keys_in_nested_objects_are_kept_as_upstream_does(env: AirlineEnv, state: AirlineState) -> None:
    flights = [{**leg, "seat": "12A"} for leg in legs(("HAT001", "2024-05-10"), ("HAT002", "2024-05-10"))]
    out = json.loads(call(env, state, "book_reservation", **booking(flights=flights)))
    assert out["flights"][0]["seat"] == "12A"
