"""Per-branch airline state: users and reservations in a copy-on-write overlay over the shared database."""

from __future__ import annotations

from josh.envs.taubench.state import OverlayState, Record


class AirlineState(OverlayState):
    """A conversation over the airline database (see ``OverlayState``). Flights are never written (no tool
    changes seats or prices), so they stay in the shared database."""

    __slots__ = ()
    tables = ("users", "reservations")

    def reservation(self, reservation_id: str) -> Record | None:
        """The current reservation record (read-only view), or ``None``."""
        return self.read("reservations", reservation_id)

    def writable_reservation(self, reservation_id: str) -> Record:
        """This branch's own mutable copy of an existing reservation record."""
        return self.writable("reservations", reservation_id)

    def add_reservation(self, reservation: Record) -> None:
        """Store a new reservation (its id must be free) as owned by this branch."""
        self.add("reservations", reservation["reservation_id"], reservation)
