"""Per-branch retail state: users and orders in a copy-on-write overlay over the shared database."""

from __future__ import annotations

from josh.envs.taubench.state import OverlayState, Record


class RetailState(OverlayState):
    """A conversation over the retail database (see ``OverlayState``); products are never written."""

    __slots__ = ()
    tables = ("users", "orders")

    def order(self, order_id: str) -> Record | None:
        """The current order record (read-only view), or ``None``."""
        return self.read("orders", order_id)

    def writable_order(self, order_id: str) -> Record:
        """This branch's own mutable copy of an existing order record."""
        return self.writable("orders", order_id)
