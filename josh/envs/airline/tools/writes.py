"""Airline tools that change the database. Each checks every precondition first and only then writes, through the
state's copy-on-write records, so a failed call leaves the state untouched.

Like τ-bench's, these tools do not enforce the policy (who may cancel, basic-economy changes, bag allowances,
payment limits); the agent must. Amounts are not rounded: gift-card balances change by exactly the amounts given.
"""

from __future__ import annotations

import json
from typing import Any

from josh.envs.airline.db import Record
from josh.envs.airline.state import AirlineState
from josh.envs.taubench.state import copy_record

BOOKING_TIME = "2024-05-15T15:00:00"
INSURANCE_PRICE = 30
BAG_PRICE = 50
_ID_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
FIRST_CERTIFICATE = 3221322


def new_reservation_id(data: AirlineState) -> str:
    """``HATHAT``, then ``HATHAU``, ``HATHAV`` (τ-bench's three ids), then ``HATHAW`` ... ``HATHA9``, ``HATHBA`` ...:
    the first id of that sequence not yet in use."""
    index = _ID_LETTERS.index("T")
    while True:
        high, low = divmod(index, len(_ID_LETTERS))
        candidate = "HATH" + _ID_LETTERS[high] + _ID_LETTERS[low]
        if data.reservation(candidate) is None:
            return candidate
        index += 1


def _priced_legs(
    data: AirlineState, flights: list[Record], cabin: str, passengers: int, kept: list[Record] | None = None
) -> tuple[list[Record], int | float] | str:
    """Copies of the requested legs with price, origin and destination filled in, and the total fare, or the error
    for the first leg that cannot be flown. A leg equal (number and date) to one of ``kept`` keeps its price."""
    legs, total = [], 0
    for requested in flights:
        leg = copy_record(requested)
        number, date = leg["flight_number"], leg["date"]
        old = next((f for f in kept or () if f["flight_number"] == number and f["date"] == date), None)
        if old is None:
            schedule = data.db.flights.get(number)
            if schedule is None:
                return f"Error: flight {number} not found"
            day = schedule["dates"].get(date)
            if day is None:
                return f"Error: flight {number} not found on date {date}"
            if day["status"] != "available":
                return f"Error: flight {number} not available on date {date}"
            if day["available_seats"][cabin] < passengers:
                return f"Error: not enough seats on flight {number}"
            old = {"price": day["prices"][cabin], "origin": schedule["origin"], "destination": schedule["destination"]}
        leg["price"], leg["origin"], leg["destination"] = old["price"], old["origin"], old["destination"]
        total += leg["price"] * passengers
        legs.append(leg)
    return legs, total


def _payment_problem(user: Record, payments: list[Record]) -> str | None:
    """Each method is the user's own and a gift card or certificate covers its own amount."""
    for payment in payments:
        method = user["payment_methods"].get(payment["payment_id"])
        if method is None:
            return f"Error: payment method {payment['payment_id']} not found"
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
            return f"Error: not enough balance in payment method {payment['payment_id']}"
    return None


def book_reservation(
    data: AirlineState,
    /,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[Record],
    passengers: list[Record],
    payment_methods: list[Record],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> str:
    """Book a reservation: price the legs at today's fares, check the payments add up, charge gift cards and use
    up certificates (their remainder is lost), and file the reservation under the user."""
    user = data.user(user_id)
    if user is None:
        return "Error: user not found"
    priced = _priced_legs(data, flights, cabin, len(passengers))
    if isinstance(priced, str):
        return priced
    legs, total = priced
    if insurance == "yes":
        total += INSURANCE_PRICE * len(passengers)
    total += BAG_PRICE * nonfree_baggages
    if (problem := _payment_problem(user, payment_methods)) is not None:
        return problem
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total:
        return f"Error: payment amount does not add up, total price is {total}, but paid {paid}"
    certificates = [
        p["payment_id"] for p in payment_methods if user["payment_methods"][p["payment_id"]]["source"] == "certificate"
    ]
    if len(set(certificates)) != len(certificates):
        return f"Error: '{next(c for c in certificates if certificates.count(c) > 1)}'"
    reservation: dict[str, Any] = {
        "reservation_id": new_reservation_id(data),
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": legs,
        "passengers": copy_record(passengers),
        "payment_history": copy_record(payment_methods),
        "created_at": BOOKING_TIME,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    owner = data.writable_user(user_id)
    for payment in payment_methods:
        method = owner["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":
            del owner["payment_methods"][payment["payment_id"]]
    owner["reservations"].append(reservation["reservation_id"])
    data.add_reservation(reservation)
    return json.dumps(reservation)


def cancel_reservation(data: AirlineState, /, reservation_id: str) -> str:
    """Cancel a reservation: a negative entry for every payment so far, status ``cancelled`` (no checks: a second
    cancellation refunds again, as in τ-bench)."""
    if data.reservation(reservation_id) is None:
        return "Error: reservation not found"
    reservation = data.writable_reservation(reservation_id)
    history = reservation["payment_history"]
    history.extend([{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in history])
    reservation["status"] = "cancelled"
    return json.dumps(reservation)


def _update_method(data: AirlineState, reservation: Record, payment_id: str, amount: int | float) -> Record | str:
    """The owner's method that pays ``amount`` for a change, or the error: not theirs, a certificate, or a gift
    card whose balance is below the amount."""
    method = data.user(reservation["user_id"])["payment_methods"].get(payment_id)  # type: ignore[index]
    if method is None:
        return "Error: payment method not found"
    if method["source"] == "certificate":
        return "Error: certificate cannot be used to update reservation"
    if method["source"] == "gift_card" and method["amount"] < amount:
        return "Error: gift card balance is not enough"
    return method


def _charge(data: AirlineState, reservation_id: str, user_id: str, payment_id: str, amount: int | float) -> Record:
    """Debit a gift card by ``amount`` (a negative amount credits it), record a non-zero payment, return the
    writable reservation."""
    if data.user(user_id)["payment_methods"][payment_id]["source"] == "gift_card":  # type: ignore[index]
        data.writable_user(user_id)["payment_methods"][payment_id]["amount"] -= amount
    reservation = data.writable_reservation(reservation_id)
    if amount != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": amount})
    return reservation


def update_reservation_flights(
    data: AirlineState, /, reservation_id: str, cabin: str, flights: list[Record], payment_id: str
) -> str:
    """Replace the itinerary: legs already booked (same number and date, unchanged cabin) keep their price, new
    ones cost today's fare; the difference is charged or refunded. As in τ-bench the reservation's ``cabin`` field
    is left as it was."""
    reservation = data.reservation(reservation_id)
    if reservation is None:
        return "Error: reservation not found"
    passengers = len(reservation["passengers"])
    kept = reservation["flights"] if cabin == reservation["cabin"] else []
    priced = _priced_legs(data, flights, cabin, passengers, kept)
    if isinstance(priced, str):
        return priced
    legs, total = priced
    total -= sum(leg["price"] for leg in reservation["flights"]) * passengers
    method = _update_method(data, reservation, payment_id, total)
    if isinstance(method, str):
        return method
    updated = _charge(data, reservation_id, reservation["user_id"], payment_id, total)
    updated["flights"] = legs
    return json.dumps(updated)


def update_reservation_baggages(
    data: AirlineState, /, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    """Set the bag counts; each non-free bag beyond those already paid costs 50 (fewer bags refund nothing)."""
    reservation = data.reservation(reservation_id)
    if reservation is None:
        return "Error: reservation not found"
    price = BAG_PRICE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    method = _update_method(data, reservation, payment_id, price)
    if isinstance(method, str):
        return method
    updated = _charge(data, reservation_id, reservation["user_id"], payment_id, price)
    updated["total_baggages"], updated["nonfree_baggages"] = total_baggages, nonfree_baggages
    return json.dumps(updated)


def update_reservation_passengers(data: AirlineState, /, reservation_id: str, passengers: list[Record]) -> str:
    """Replace the passenger list; its length must stay the same."""
    reservation = data.reservation(reservation_id)
    if reservation is None:
        return "Error: reservation not found"
    if len(passengers) != len(reservation["passengers"]):
        return "Error: number of passengers does not match"
    reservation = data.writable_reservation(reservation_id)
    reservation["passengers"] = copy_record(passengers)
    return json.dumps(reservation)


def send_certificate(data: AirlineState, /, user_id: str, amount: int | float) -> str:
    """Add a certificate worth ``amount`` under the first free id of ``certificate_3221322``, ``..23``, ``..24``
    (τ-bench's three), ``..25`` and so on."""
    user = data.user(user_id)
    if user is None:
        return "Error: user not found"
    number = FIRST_CERTIFICATE
    while f"certificate_{number}" in user["payment_methods"]:
        number += 1
    payment_id = f"certificate_{number}"
    methods = data.writable_user(user_id)["payment_methods"]
    methods[payment_id] = {"source": "certificate", "amount": amount, "id": payment_id}
    return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
