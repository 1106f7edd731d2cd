"""A tiny airline database and task file for rule tests (no shared data needed): two users, three reservations,
five flights over a few days, shaped like τ-bench's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEATS = {"basic_economy": 5, "economy": 5, "business": 2}
PRICES = {"basic_economy": 50, "economy": 100, "business": 300}


def _available(seats: dict[str, int] | None = None) -> dict[str, Any]:
    return {"status": "available", "available_seats": dict(seats or SEATS), "prices": dict(PRICES)}


def _flight(number: str, origin: str, destination: str, leaves: str, arrives: str) -> dict[str, Any]:
    dates = {
        "2024-05-01": _available(),
        "2024-05-09": _available(),
        "2024-05-10": _available(),
        "2024-05-11": {"status": "cancelled"},
        "2024-05-12": {"status": "landed", "actual_departure_time_est": "x", "actual_arrival_time_est": "y"},
    }
    return {
        "flight_number": number,
        "origin": origin,
        "destination": destination,
        "scheduled_departure_time_est": leaves,
        "scheduled_arrival_time_est": arrives,
        "dates": dates,
    }


FLIGHTS = {
    "HAT001": _flight("HAT001", "JFK", "ORD", "08:00:00", "10:00:00"),
    "HAT002": _flight("HAT002", "ORD", "SFO", "11:00:00", "14:00:00"),
    "HAT003": _flight("HAT003", "JFK", "SFO", "09:00:00", "13:00:00"),
    "HAT004": _flight("HAT004", "JFK", "ORD", "22:00:00", "01:00:00+1"),
    "HAT005": _flight("HAT005", "ORD", "SFO", "06:00:00", "09:00:00"),
}
FLIGHTS["HAT003"]["dates"]["2024-05-10"]["available_seats"]["business"] = 1
FLIGHTS["HAT002"]["dates"]["2024-05-09"]["available_seats"]["economy"] = 3


def _user(first: str, last: str, membership: str, methods: dict[str, dict[str, Any]], reservations: list[str]):
    return {
        "name": {"first_name": first, "last_name": last},
        "address": {
            "address1": "1 Main St",
            "address2": "",
            "city": "Austin",
            "country": "USA",
            "state": "TX",
            "zip": "78701",
        },
        "email": f"{first.lower()}@example.com",
        "dob": "1980-01-01",
        "payment_methods": {key: {**value, "id": key} for key, value in methods.items()},
        "saved_passengers": [],
        "membership": membership,
        "reservations": reservations,
    }


USERS = {
    "ann_lee_1": _user(
        "Ann",
        "Lee",
        "gold",
        {
            "credit_card_1": {"source": "credit_card", "brand": "visa", "last_four": "1111"},
            "gift_card_1": {"source": "gift_card", "amount": 500},
            "certificate_1": {"source": "certificate", "amount": 100},
        },
        ["AAA111", "BBB222"],
    ),
    "bo_kim_2": _user("Bo", "Kim", "regular", {"gift_card_2": {"source": "gift_card", "amount": 10}}, ["CCC333"]),
}
ANN, BO = "ann_lee_1", "bo_kim_2"


def _reservation(rid: str, user: str, cabin: str, legs: list[tuple[str, str, int]], passengers: int, paid: list):
    flights = [
        {
            "origin": FLIGHTS[n]["origin"],
            "destination": FLIGHTS[n]["destination"],
            "flight_number": n,
            "date": d,
            "price": p,
        }
        for n, d, p in legs
    ]
    return {
        "reservation_id": rid,
        "user_id": user,
        "origin": flights[0]["origin"],
        "destination": flights[-1]["destination"],
        "flight_type": "one_way",
        "cabin": cabin,
        "flights": flights,
        "passengers": [{"first_name": f"P{i}", "last_name": "Lee", "dob": "1990-01-01"} for i in range(passengers)],
        "payment_history": [{"payment_id": method, "amount": amount} for method, amount in paid],
        "created_at": "2024-05-14T10:00:00",
        "total_baggages": 1,
        "nonfree_baggages": 1,
        "insurance": "no",
    }


RESERVATIONS = {
    "AAA111": _reservation(
        "AAA111",
        ANN,
        "economy",
        [("HAT001", "2024-05-10", 90), ("HAT002", "2024-05-10", 80)],
        2,
        [("credit_card_1", 390)],
    ),
    "BBB222": _reservation("BBB222", ANN, "business", [("HAT003", "2024-05-09", 250)], 1, [("gift_card_1", 250)]),
    "CCC333": _reservation("CCC333", BO, "basic_economy", [("HAT003", "2024-05-10", 40)], 1, [("gift_card_2", 40)]),
}

TASKS = [
    {
        "user_id": ANN,
        "instruction": "Your user id is ann_lee_1. You want to cancel reservation BBB222.",
        "actions": [
            {"name": "get_reservation_details", "kwargs": {"reservation_id": "BBB222"}},
            {"name": "cancel_reservation", "kwargs": {"reservation_id": "BBB222"}},
        ],
        "outputs": [],
    },
    {
        "user_id": BO,
        "instruction": "Your user id is bo_kim_2. You want to know how many airports there are.",
        "actions": [{"name": "list_all_airports", "kwargs": {}}],
        "outputs": ["20"],
    },
]


def write_airline(folder: Path, **overrides: Any) -> Path:
    """Write the tiny data set into ``folder`` (``users=...`` etc. replace a file's content); returns ``folder``."""
    content = {
        "users.json": USERS,
        "reservations.json": RESERVATIONS,
        "flights.json": FLIGHTS,
        "tasks_test.json": TASKS,
        **{f"{key}.json": value for key, value in overrides.items()},
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in content.items():
        (folder / name).write_text(json.dumps(data))
    (folder / "policy.md").write_text("# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.\n")
    return folder
