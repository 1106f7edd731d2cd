"""Airline tools that read the database. The shared ones (``calculate``, ``get_user_details``,
``think``, the transfer) are in ``josh.envs.taubench.tools``."""

from __future__ import annotations

import json

from josh.envs.airline.db import Record
from josh.envs.airline.state import AirlineState

AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "SEA": "Seattle",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "BOS": "Boston",
    "PHX": "Phoenix",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "MCO": "Orlando",
    "EWR": "Newark",
    "CLT": "Charlotte",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
    "LGA": "LaGuardia",
}
_AIRPORTS_JSON = json.dumps(AIRPORTS)


def get_reservation_details(data: AirlineState, /, reservation_id: str) -> str:
    """The reservation's JSON; a missing one answers ``Error: user not found``, τ-bench's text for it."""
    reservation = data.reservation(reservation_id)
    return json.dumps(reservation) if reservation is not None else "Error: user not found"


def list_all_airports(data: AirlineState, /) -> str:
    """The 20 airport codes served, mapped to their cities."""
    return _AIRPORTS_JSON


def _listing(flight: Record, day: Record) -> Record:
    """A search result: the flight without its calendar, plus one day's status, seats and prices."""
    out = {key: value for key, value in flight.items() if key != "dates"}
    out.update(day)
    return out


def search_direct_flight(data: AirlineState, /, origin: str, destination: str, date: str) -> str:
    """The nonstop flights of the route whose status on ``date`` is ``available``, in file order."""
    results = []
    for number in data.db.routes.get((origin, destination), ()):
        flight = data.db.flights[number]
        day = flight["dates"].get(date)
        if day is not None and day["status"] == "available":
            results.append(_listing(flight, day))
    return json.dumps(results)


def next_day(date: str) -> str:
    """τ-bench's day after ``date``: ``2024-05-`` and the day number plus one, unpadded (``2024-05-2`` after the
    1st, so connections that arrive after midnight are found only from the 9th on)."""
    return f"2024-05-{int(date[-2:]) + 1}"


def search_onestop_flight(data: AirlineState, /, origin: str, destination: str, date: str) -> str:
    """Pairs of available flights origin -> stop -> destination where the first lands (by schedule) no later than
    the second leaves; the second leg flies the next day when the first arrives after midnight (``+1``)."""
    flights, results = data.db.flights, []
    for first_number in data.db.departures.get(origin, ()):
        first = flights[first_number]
        for second_number in data.db.routes.get((first["destination"], destination), ()):
            second = flights[second_number]
            arrival = first["scheduled_arrival_time_est"]
            try:
                date2 = next_day(date) if "+1" in arrival else date
            except ValueError as exc:
                return f"Error: {exc}"
            if arrival > second["scheduled_departure_time_est"]:
                continue
            day1, day2 = first["dates"].get(date), second["dates"].get(date2)
            if day1 is None or day2 is None or day1["status"] != "available" or day2["status"] != "available":
                continue
            if date not in second["dates"]:
                return f"Error: '{date}'"
            # τ-bench lists the second leg with its status, seats and prices of the departure date, not date2
            results.append(
                [{**_listing(first, day1), "date": date}, {**_listing(second, second["dates"][date]), "date": date2}]
            )
    return json.dumps(results)
