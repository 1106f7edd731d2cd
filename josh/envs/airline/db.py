"""The read-only airline database (users, reservations, flights) loaded once from a data folder, checked and
indexed in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from josh.envs.taubench.db import Record, Shape, check_data_dir, read_records
from josh.util.filestamps import FolderCache

DATA_FILES = ("users.json", "reservations.json", "flights.json", "policy.md")
CABINS = ("basic_economy", "economy", "business")


class AirlineDataError(ValueError):
    """The airline data folder is missing, or one of its files holds a record of the wrong shape."""


class _Passenger(Shape):
    first_name: str
    last_name: str
    dob: str


class _FlightLeg(Shape):
    flight_number: str
    date: str
    origin: str
    destination: str
    price: int | float


class _Payment(Shape):
    payment_id: str
    amount: int | float


class ReservationShape(Shape):
    """The fields the tools read from a reservation (others are kept as they are)."""

    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: str
    cabin: Literal["basic_economy", "economy", "business"]
    flights: list[_FlightLeg]
    passengers: list[_Passenger]
    payment_history: list[_Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: str


class _Method(Shape):
    source: Literal["credit_card", "gift_card", "certificate"]
    id: str
    amount: int | float | None = None


class UserShape(Shape):
    """The fields the tools read from a user."""

    payment_methods: dict[str, _Method]
    reservations: list[str]


class _Schedule(Shape):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class AirlineDB:
    """The pristine data every conversation starts from; never mutated (states keep copy-on-write overlays).

    ``routes`` maps (origin, destination) to flight numbers and ``departures`` maps an origin to flight numbers,
    both in file order, which is the order the search tools return results in.
    """

    users: dict[str, Record]
    reservations: dict[str, Record]
    flights: dict[str, Record]
    policy: str
    routes: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    departures: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, users: dict[str, Record], reservations: dict[str, Record], flights: dict[str, Record], policy: str
    ) -> AirlineDB:
        """Index the flights by route and by origin."""
        routes: dict[tuple[str, str], list[str]] = {}
        departures: dict[str, list[str]] = {}
        for number, flight in flights.items():
            routes.setdefault((flight["origin"], flight["destination"]), []).append(number)
            departures.setdefault(flight["origin"], []).append(number)
        return cls(users, reservations, flights, policy, routes, departures)


def _check_links(path: Path, users: dict[str, Record], reservations: dict[str, Record]) -> None:
    """Every reservation belongs to a known user and is filed under its own id."""
    for key, reservation in reservations.items():
        if reservation["reservation_id"] != key:
            raise AirlineDataError(
                f"{path / 'reservations.json'}: reservation {key!r} holds id {reservation['reservation_id']!r}"
            )
        if reservation["user_id"] not in users:
            raise AirlineDataError(
                f"{path / 'reservations.json'}: reservation {key!r} names user {reservation['user_id']!r}, "
                "who is not in users.json"
            )


def read_db(data_dir: Path | str) -> AirlineDB:
    """Read and check the airline database of ``data_dir`` (no caching; ``load_db`` caches)."""
    path = check_data_dir(data_dir, "airline", DATA_FILES, AirlineDataError)
    users = read_records(path / "users.json", UserShape, "user", AirlineDataError)
    reservations = read_records(path / "reservations.json", ReservationShape, "reservation", AirlineDataError)
    flights = read_records(path / "flights.json", _Schedule, "flight", AirlineDataError)
    _check_links(path, users, reservations)
    return AirlineDB.build(users, reservations, flights, (path / "policy.md").read_text(encoding="utf-8"))


_cached: FolderCache[AirlineDB] = FolderCache(read_db, DATA_FILES, 4)


def load_db(data_dir: Path | str) -> AirlineDB:
    """Load the airline database of ``data_dir`` (kept in memory while its files are unchanged)."""
    return _cached(check_data_dir(data_dir, "airline", DATA_FILES, AirlineDataError))
