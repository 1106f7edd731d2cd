"""Properties of the airline rules (hypothesis): a call with a wrong argument type changes nothing, a failed write
changes nothing, and forks never see each other's writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josh.envs.airline import AirlineEnv
from josh.envs.airline.tools import TOOLS, WRITE_TOOLS
from josh.types import ErrorCategory, ToolCall
from tests.airline_data import ANN, BO, FLIGHTS, RESERVATIONS, USERS, write_airline

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> AirlineEnv:
    return AirlineEnv(write_airline(tmp_path_factory.mktemp("airline")))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 500) | st.floats(-5, 500, allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
dates = st.sampled_from(["2024-05-01", "2024-05-09", "2024-05-10", "2024-05-11", "2024-05-20"])
leg = st.fixed_dictionaries({"flight_number": st.sampled_from([*FLIGHTS, "HAT999"]), "date": dates})
passenger = st.fixed_dictionaries(
    {"first_name": st.sampled_from(["Ann", "Bo"]), "last_name": st.just("Lee"), "dob": st.just("1990-01-01")}
)
users = st.sampled_from([*USERS, "nobody"])
reservations = st.sampled_from([*RESERVATIONS, "ZZZ999"])
methods = st.sampled_from(["credit_card_1", "gift_card_1", "certificate_1", "gift_card_2", "nope"])
cabins = st.sampled_from(["basic_economy", "economy", "business"])
payment = st.fixed_dictionaries({"payment_id": methods, "amount": st.integers(0, 700)})
bags = st.integers(0, 4)

VALID = {
    "book_reservation": st.fixed_dictionaries(
        {
            "user_id": users,
            "origin": st.just("JFK"),
            "destination": st.just("SFO"),
            "flight_type": st.sampled_from(["one_way", "round_trip"]),
            "cabin": cabins,
            "flights": st.lists(leg, min_size=1, max_size=2),
            "passengers": st.lists(passenger, min_size=1, max_size=3),
            "payment_methods": st.lists(payment, min_size=1, max_size=2),
            "total_baggages": bags,
            "nonfree_baggages": bags,
            "insurance": st.sampled_from(["yes", "no"]),
        }
    ),
    "cancel_reservation": st.fixed_dictionaries({"reservation_id": reservations}),
    "update_reservation_baggages": st.fixed_dictionaries(
        {"reservation_id": reservations, "total_baggages": bags, "nonfree_baggages": bags, "payment_id": methods}
    ),
    "update_reservation_flights": st.fixed_dictionaries(
        {"reservation_id": reservations, "cabin": cabins, "flights": st.lists(leg, max_size=3), "payment_id": methods}
    ),
    "update_reservation_passengers": st.fixed_dictionaries(
        {"reservation_id": reservations, "passengers": st.lists(passenger, max_size=3)}
    ),
    "send_certificate": st.fixed_dictionaries({"user_id": users, "amount": st.integers(0, 300)}),
}
write_calls = st.sampled_from(WRITE_TOOLS).flatmap(
    lambda name: VALID[name].map(lambda args: ToolCall(name=name, arguments=args))
)


@st.composite
def badly_typed(draw: st.DrawFn) -> ToolCall:
    """A write call with one argument replaced by a value of another JSON type."""
    call = draw(write_calls)
    arguments: dict[str, Any] = dict(call.arguments)  # type: ignore[arg-type]
    key = draw(st.sampled_from(sorted(arguments)))
    kind = TOOLS[call.name].parameters[key]["type"]
    wrong = {
        "string": json_values.filter(lambda v: not isinstance(v, str)),
        "integer": json_values.filter(lambda v: not isinstance(v, int) or isinstance(v, bool)),
        "number": json_values.filter(lambda v: not isinstance(v, (int, float)) or isinstance(v, bool)),
        "array": json_values.filter(lambda v: not isinstance(v, list)),
    }[kind]
    arguments[key] = draw(wrong)
    return ToolCall(name=call.name, arguments=arguments)


@SETTINGS
@given(prefix=st.lists(write_calls, max_size=3), bad=badly_typed())
def test_a_wrongly_typed_call_never_changes_the_database(
    env: AirlineEnv, prefix: list[ToolCall], bad: ToolCall
) -> None:
    state = env.reset(env.tasks("test")[0])
    for call in prefix:
        env.call(state, call)
    before = state.data_hash()
    result = env.call(state, bad)
    assert result.error == ErrorCategory.INVALID_VALUE and state.data_hash() == before


@SETTINGS
@given(calls=st.lists(write_calls, min_size=1, max_size=6))
def test_a_failed_write_changes_nothing_and_bookings_always_change_something(
    env: AirlineEnv, calls: list[ToolCall]
) -> None:
    state = env.reset(env.tasks("test")[0])
    for call in calls:
        before = state.data_hash()
        result = env.call(state, call)
        if result.error is not None:
            assert result.content.startswith("Error: ") and state.data_hash() == before
        elif call.name in ("book_reservation", "cancel_reservation", "send_certificate"):
            assert state.data_hash() != before


@SETTINGS
@given(
    shared=st.lists(write_calls, max_size=3),
    left=st.lists(write_calls, max_size=4),
    right=st.lists(write_calls, max_size=4),
)
def test_forks_are_isolated_and_replayable(
    env: AirlineEnv, shared: list[ToolCall], left: list[ToolCall], right: list[ToolCall]
) -> None:
    task = env.tasks("test")[0]
    root = env.reset(task)
    for call in shared:
        env.call(root, call)
    root_hash = root.data_hash()
    a, b = root.fork(), root.fork()
    for call in left:
        env.call(a, call)
    for call in right:
        env.call(b, call)
    assert root.data_hash() == root_hash
    for branch, calls in ((a, left), (b, right)):
        fresh = env.reset(task)
        for call in [*shared, *calls]:
            env.call(fresh, call)
        assert fresh.data_hash() == branch.data_hash()
    assert env.db.users[ANN]["payment_methods"]["gift_card_1"]["amount"] == 500
    assert env.db.users[BO]["reservations"] == ["CCC333"]
