"""The read-only airline database (users, reservations, flights) loaded once from a data folder, checked and
indexed in memory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

DATA_FILES = ("users.json", "reservations.json", "flights.json", "policy.md")
CABINS = ("basic_economy", "economy", "business")

Record = dict[str, Any]


class AirlineDataError(ValueError):
    """The airline data folder is missing, or one of its files holds a record of the wrong shape."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Passenger(_Loose):
    first_name: str
    last_name: str
    dob: str


class _FlightLeg(_Loose):
    flight_number: str
    date: str
    origin: str
    destination: str
    price: int | float


class _Payment(_Loose):
    payment_id: str
    amount: int | float


class ReservationShape(_Loose):
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


class _Method(_Loose):
    source: Literal["credit_card", "gift_card", "certificate"]
    id: str
    amount: int | float | None = None


class UserShape(_Loose):
    """The fields the tools read from a user."""

    payment_methods: dict[str, _Method]
    reservations: list[str]


class _Schedule(_Loose):
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


def _read_records(path: Path, shape: type[BaseModel], kind: str) -> dict[str, Record]:
    """A JSON object of records keyed by id, each checked against ``shape``; errors name the file and the record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AirlineDataError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise AirlineDataError(f"{path} must hold a JSON object of {kind}s keyed by id")
    for key, record in data.items():
        try:
            shape.model_validate(record)
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:3])
            raise AirlineDataError(f"{path}: {kind} {key!r} is malformed: {problem}") from None
    return data


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


def check_data_dir(data_dir: Path) -> Path:
    """Resolve ``data_dir`` and make sure the airline files are there, with a hint on how to get them."""
    path = Path(data_dir).expanduser().resolve()
    missing = [name for name in DATA_FILES if not (path / name).is_file()]
    if missing:
        raise AirlineDataError(
            f"airline data folder {path} lacks {', '.join(missing)}; "
            f"fetch it with `josh data download airline --dest {path}`"
        )
    return path


def read_db(data_dir: Path | str) -> AirlineDB:
    """Read and check the airline database of ``data_dir`` (no caching; ``load_db`` caches)."""
    path = check_data_dir(Path(data_dir))
    users = _read_records(path / "users.json", UserShape, "user")
    reservations = _read_records(path / "reservations.json", ReservationShape, "reservation")
    flights = _read_records(path / "flights.json", _Schedule, "flight")
    _check_links(path, users, reservations)
    return AirlineDB.build(users, reservations, flights, (path / "policy.md").read_text(encoding="utf-8"))


@lru_cache(maxsize=4)
def _cached(path: Path) -> AirlineDB:
    return read_db(path)


def load_db(data_dir: Path | str) -> AirlineDB:
    """Load (once per folder, then cached) the airline database of ``data_dir``."""
    return _cached(check_data_dir(Path(data_dir)))
