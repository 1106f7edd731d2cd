"""The read-only retail database (users, orders, products) loaded once from a data folder and indexed in memory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import model_validator

from josh.envs.taubench.db import Record, Shape, check_data_dir, read_records
from josh.util.filestamps import FolderCache

DATA_FILES = ("users.json", "orders.json", "products.json", "policy.md")


class RetailDataError(ValueError):
    """The retail data folder is missing or holds files of the wrong shape."""


class _Name(Shape):
    first_name: str
    last_name: str


class _Address(Shape):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class _PaymentMethod(Shape):
    source: str
    balance: float | None = None

    @model_validator(mode="after")
    def _gift_cards_have_a_balance(self) -> _PaymentMethod:
        if self.source == "gift_card" and self.balance is None:
            raise ValueError("a gift card needs a balance")
        return self


class _User(Shape):
    name: _Name
    address: _Address
    email: str
    payment_methods: dict[str, _PaymentMethod]
    orders: list[str] = []


class _Item(Shape):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, Any]


class _Payment(Shape):
    transaction_type: str
    amount: float
    payment_method_id: str


class _Order(Shape):
    order_id: str
    user_id: str
    address: _Address
    items: list[_Item]
    status: str
    payment_history: list[_Payment]
    fulfillments: list[dict[str, Any]] = []


class _Variant(Shape):
    item_id: str
    options: dict[str, Any]
    available: bool
    price: float


class _Product(Shape):
    name: str
    product_id: str
    variants: dict[str, _Variant]


_SHAPES: dict[str, tuple[str, type[Shape]]] = {
    "users.json": ("user", _User),
    "orders.json": ("order", _Order),
    "products.json": ("product", _Product),
}


@dataclass(frozen=True)
class RetailDB:
    """The pristine data every conversation starts from; never mutated (states keep copy-on-write overlays)."""

    users: dict[str, Record]
    orders: dict[str, Record]
    products: dict[str, Record]
    policy: str
    user_by_email: dict[str, str] = field(default_factory=dict)
    user_rank: dict[str, int] = field(default_factory=dict)
    users_by_name: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    product_types_json: str = "{}"

    @classmethod
    def build(
        cls, users: dict[str, Record], orders: dict[str, Record], products: dict[str, Record], policy: str
    ) -> RetailDB:
        """Index the records: e-mail lookup, (first, last) name lookup, user order and the product-type listing."""
        by_email: dict[str, str] = {}
        by_name: dict[tuple[str, str], list[str]] = {}
        for user_id, profile in users.items():
            by_email.setdefault(profile["email"].lower(), user_id)
            name = profile["name"]
            by_name.setdefault((name["first_name"].lower(), name["last_name"].lower()), []).append(user_id)
        types = dict(sorted((p["name"], p["product_id"]) for p in products.values()))
        return cls(
            users=users,
            orders=orders,
            products=products,
            policy=policy,
            user_by_email=by_email,
            user_rank={user_id: i for i, user_id in enumerate(users)},
            users_by_name=by_name,
            product_types_json=json.dumps(types),
        )


def _read(path: Path) -> RetailDB:
    users, orders, products = (
        read_records(path / name, shape, kind, RetailDataError) for name, (kind, shape) in _SHAPES.items()
    )
    return RetailDB.build(users, orders, products, (path / "policy.md").read_text(encoding="utf-8"))


_cached: FolderCache[RetailDB] = FolderCache(_read, DATA_FILES, 4)


def load_db(data_dir: Path | str) -> RetailDB:
    """Load the retail database of ``data_dir`` (kept in memory while its files are unchanged)."""
    return _cached(check_data_dir(data_dir, "retail", DATA_FILES, RetailDataError))
