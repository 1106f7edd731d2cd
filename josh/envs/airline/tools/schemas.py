"""OpenAI function schemas of the 14 airline tools (descriptions written for this project)."""

from __future__ import annotations

from typing import Any

from josh.envs.airline.db import CABINS
from josh.envs.taubench.tools import (
    STRING,
    THINK,
    TRANSFER,
    calculate_schema,
    function_schema,
    object_schema,
)

_STR = STRING
_INT = {"type": "integer"}
_NUM = {"type": "number"}


_object = object_schema
_fn = function_schema


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


_RESERVATION_ID = (_STR, "The six-character reservation id, e.g. 'ZFA04Y'.")
_USER_ID = (_STR, "The user id, e.g. 'sara_doe_496'.")
_PAYMENT_ID = (
    _STR,
    "A payment method id from the user's profile, e.g. 'credit_card_7815826' or 'gift_card_7815826'.",
)
_CABIN = ({"type": "string", "enum": list(CABINS)}, "The cabin class: basic_economy, economy or business.")
_AIRPORT = "Three-letter IATA airport code, e.g. '{}'."
_DATE = (_STR, "The date as YYYY-MM-DD, e.g. '2024-05-20'.")
_FLIGHTS = _array(_object({"flight_number": (_STR, "The flight number, e.g. 'HAT001'."), "date": _DATE}))
_PASSENGERS = _array(
    _object(
        {
            "first_name": (_STR, "First name, e.g. 'Noah'."),
            "last_name": (_STR, "Last name, e.g. 'Brown'."),
            "dob": (_STR, "Date of birth as YYYY-MM-DD, e.g. '1990-01-01'."),
        }
    )
)
_PAYMENTS = _array(
    _object(
        {
            "payment_id": (_STR, "A payment method id from the user's profile, e.g. 'certificate_7815826'."),
            "amount": (_NUM, "The amount charged to this method."),
        }
    )
)
_SEARCH = {
    "origin": (_STR, _AIRPORT.format("JFK")),
    "destination": (_STR, _AIRPORT.format("LAX")),
    "date": _DATE,
}

SCHEMAS: list[dict[str, Any]] = [
    _fn(
        "book_reservation",
        "Book a new reservation for a user, after they confirmed every detail. All passengers fly the same flights "
        "in the same cabin; the payments must add up to the total price.",
        {
            "user_id": _USER_ID,
            "origin": (_STR, _AIRPORT.format("SFO") + " Where the trip starts."),
            "destination": (_STR, _AIRPORT.format("JFK") + " Where the trip goes (not where it returns to)."),
            "flight_type": ({"type": "string", "enum": ["one_way", "round_trip"]}, "one_way or round_trip."),
            "cabin": _CABIN,
            "flights": (_FLIGHTS, "Every flight segment of the trip, each with its number and date."),
            "passengers": (_PASSENGERS, "Every passenger (at most five), with name and date of birth."),
            "payment_methods": (_PAYMENTS, "How the total is split over the user's payment methods."),
            "total_baggages": (_INT, "Checked bags in the reservation."),
            "nonfree_baggages": (_INT, "Checked bags beyond the free allowance (50 dollars each)."),
            "insurance": ({"type": "string", "enum": ["yes", "no"]}, "Travel insurance (30 dollars per passenger)."),
        },
    ),
    calculate_schema("(120 + 30) * 2"),
    _fn(
        "cancel_reservation",
        "Cancel a whole reservation after the user confirmed it; every payment is refunded to its method.",
        {"reservation_id": _RESERVATION_ID},
    ),
    _fn(
        "get_reservation_details",
        "Return a reservation: flights, passengers, payments, bags, insurance.",
        {"reservation_id": _RESERVATION_ID},
    ),
    _fn(
        "get_user_details",
        "Return a user's profile: name, address, date of birth, payment methods (with balances), saved "
        "passengers, membership and reservation ids.",
        {"user_id": _USER_ID},
    ),
    _fn("list_all_airports", "List the airport codes served, each with its city.", {}),
    _fn(
        "search_direct_flight",
        "Find the bookable nonstop flights between two airports on a date, with seats left and prices per cabin.",
        _SEARCH,
    ),
    _fn(
        "search_onestop_flight",
        "Find the bookable one-stop connections between two airports departing on a date, as pairs of flights.",
        _SEARCH,
    ),
    _fn(
        "send_certificate",
        "Give a user a travel certificate worth an amount, as a goodwill gesture allowed by the policy.",
        {"user_id": _USER_ID, "amount": (_NUM, "The certificate's value in dollars.")},
    ),
    THINK,
    TRANSFER,
    _fn(
        "update_reservation_baggages",
        "Set the checked bags of a reservation, after the user confirmed it; added non-free bags are charged.",
        {
            "reservation_id": _RESERVATION_ID,
            "total_baggages": (_INT, "The new total of checked bags."),
            "nonfree_baggages": (_INT, "The new number of bags beyond the free allowance."),
            "payment_id": _PAYMENT_ID,
        },
    ),
    _fn(
        "update_reservation_flights",
        "Change the flights and/or cabin of a reservation, after the user confirmed it. The price difference is "
        "charged to or refunded to the given method.",
        {
            "reservation_id": _RESERVATION_ID,
            "cabin": _CABIN,
            "flights": (_FLIGHTS, "Every flight of the new itinerary, including the segments that do not change."),
            "payment_id": _PAYMENT_ID,
        },
    ),
    _fn(
        "update_reservation_passengers",
        "Replace the passengers of a reservation (their number cannot change), after the user confirmed it.",
        {"reservation_id": _RESERVATION_ID, "passengers": (_PASSENGERS, "Every passenger, in the new version.")},
    ),
]
