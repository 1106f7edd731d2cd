"""Retail tools that change the database. Each checks every precondition first and only then writes, through the
state's copy-on-write records, so a failed call leaves the state untouched."""

from __future__ import annotations

import json
from collections import Counter

from josh.envs.retail.db import Record
from josh.envs.retail.state import RetailState

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    return {"address1": address1, "address2": address2, "city": city, "state": state, "country": country, "zip": zip}


def _order_in(data: RetailState, order_id: str, status: str, action: str) -> Record | str:
    """The order, if it exists and has ``status``; else the τ-bench error text (``action``: what was refused)."""
    order = data.order(order_id)
    if order is None:
        return "Error: order not found"
    if order["status"] != status:
        return f"Error: non-{status} order cannot be {action}"
    return order


def _missing_item(order: Record, item_ids: list[str]) -> str | None:
    """The first requested item id that occurs more often in ``item_ids`` than in the order."""
    have = Counter(item["item_id"] for item in order["items"])
    want = Counter(item_ids)
    return next((item_id for item_id in item_ids if want[item_id] > have[item_id]), None)


def _price_difference(data: RetailState, /, order: Record, item_ids: list[str], new_item_ids: list[str]) -> float | str:
    """Sum of (new variant price - old item price) over the pairs, or the error for the first bad new item."""
    diff: float = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(item for item in order["items"] if item["item_id"] == item_id)
        variant = data.db.products.get(item["product_id"], {}).get("variants", {}).get(new_item_id)
        if variant is None or not variant["available"]:
            return f"Error: new item {new_item_id} not found or available"
        diff += variant["price"] - item["price"]
    return diff


def _payment_method(data: RetailState, /, order: Record, payment_method_id: str) -> Record | None:
    user = data.user(order["user_id"])
    return None if user is None else user["payment_methods"].get(payment_method_id)


def _adjust_gift_card(data: RetailState, /, user_id: str, method_id: str, delta: float) -> None:
    method = data.writable_user(user_id)["payment_methods"][method_id]
    method["balance"] = round(method["balance"] + delta, 2)


def cancel_pending_order(data: RetailState, /, order_id: str, reason: str) -> str:
    """Cancel a pending order: refund every payment (gift cards at once) and record the reason."""
    order = _order_in(data, order_id, "pending", "cancelled")
    if isinstance(order, str):
        return order
    if reason not in CANCEL_REASONS:
        return "Error: invalid reason"
    owner = data.user(order["user_id"])
    payments = list(order["payment_history"])
    gift_cards = [p for p in payments if "gift_card" in p["payment_method_id"]]
    if any(owner is None or p["payment_method_id"] not in owner["payment_methods"] for p in gift_cards):
        return "Error: payment method not found"
    for payment in gift_cards:
        _adjust_gift_card(data, order["user_id"], payment["payment_method_id"], payment["amount"])
    order = data.writable_order(order_id)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(
        {"transaction_type": "refund", "amount": p["amount"], "payment_method_id": p["payment_method_id"]}
        for p in payments
    )
    return json.dumps(order)


def modify_pending_order_address(
    data: RetailState, /, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace the shipping address of a pending order."""
    order = _order_in(data, order_id, "pending", "modified")
    if isinstance(order, str):
        return order
    order = data.writable_order(order_id)
    order["address"] = _address(address1, address2, city, state, country, zip)
    return json.dumps(order)


def modify_pending_order_payment(data: RetailState, /, order_id: str, payment_method_id: str) -> str:
    """Pay a pending order with another method: charge the new one, refund the old one (gift cards at once)."""
    order = _order_in(data, order_id, "pending", "modified")
    if isinstance(order, str):
        return order
    method = _payment_method(data, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        return "Error: there should be exactly one payment for a pending order"
    old_id, amount = history[0]["payment_method_id"], history[0]["amount"]
    if old_id == payment_method_id:
        return "Error: the new payment method should be different from the current one"
    if method["source"] == "gift_card" and method["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    old_is_card = "gift_card" in old_id and _payment_method(data, order, old_id) is not None
    if method["source"] == "gift_card":
        _adjust_gift_card(data, order["user_id"], payment_method_id, -amount)
    if old_is_card:
        _adjust_gift_card(data, order["user_id"], old_id, amount)
    order = data.writable_order(order_id)
    order["payment_history"].extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
        ]
    )
    return json.dumps(order)


def _swap_items(
    data: RetailState,
    order_id: str,
    item_ids: list[str],
    new_item_ids: list[str],
    payment_method_id: str,
    *,
    exchange: bool,
) -> str:
    """The item swap shared by modify (a pending order, paid at once) and exchange (a delivered one, only
    requested): check every precondition, then write; a gift card must cover the price difference.

    Exchange rounds the difference to cents before its balance check; modify does not (a tau-bench quirk)."""
    status, action = ("delivered", "exchanged") if exchange else ("pending", "modified")
    order = _order_in(data, order_id, status, action)
    if isinstance(order, str):
        return order
    if (missing := _missing_item(order, item_ids)) is not None:
        return f"Error: {missing} not found"
    if len(item_ids) != len(new_item_ids):
        return "Error: the number of items to be exchanged should match"
    diff = _price_difference(data, order, item_ids, new_item_ids)
    if isinstance(diff, str):
        return diff
    method = _payment_method(data, order, payment_method_id)
    if method is None:
        return "Error: payment method not found"
    diff = round(diff, 2) if exchange else diff
    if method["source"] == "gift_card" and method["balance"] < diff:
        pays_for = "the price difference" if exchange else "the new item"
        return f"Error: insufficient gift card balance to pay for {pays_for}"
    if exchange:
        order = data.writable_order(order_id)
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return json.dumps(order)
    if method["source"] == "gift_card":
        _adjust_gift_card(data, order["user_id"], payment_method_id, -diff)
    order = data.writable_order(order_id)
    order["payment_history"].append(
        {
            "transaction_type": "payment" if diff > 0 else "refund",
            "amount": abs(diff),
            "payment_method_id": payment_method_id,
        }
    )
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(item for item in order["items"] if item["item_id"] == item_id)
        variant = data.db.products[item["product_id"]]["variants"][new_item_id]
        item.update(item_id=new_item_id, price=variant["price"], options=dict(variant["options"]))
    order["status"] = "pending (item modified)"
    return json.dumps(order)


def modify_pending_order_items(
    data: RetailState, /, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Swap items of a pending order for other available variants of the same products (allowed once)."""
    return _swap_items(data, order_id, item_ids, new_item_ids, payment_method_id, exchange=False)


def return_delivered_order_items(
    data: RetailState, /, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Request a return of delivered items, refunded to the original method or a gift card."""
    order = _order_in(data, order_id, "delivered", "returned")
    if isinstance(order, str):
        return order
    if _payment_method(data, order, payment_method_id) is None:
        return "Error: payment method not found"
    original = order["payment_history"][0]["payment_method_id"] if order["payment_history"] else None
    if "gift_card" not in payment_method_id and payment_method_id != original:
        return "Error: payment method should be either the original payment method or a gift card"
    if _missing_item(order, item_ids) is not None:
        return "Error: some item not found"
    order = data.writable_order(order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return json.dumps(order)


def exchange_delivered_order_items(
    data: RetailState, /, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Request an exchange of delivered items for other available variants of the same products."""
    return _swap_items(data, order_id, item_ids, new_item_ids, payment_method_id, exchange=True)


def modify_user_address(
    data: RetailState, /, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace a user's default address (existing orders keep theirs)."""
    if data.user(user_id) is None:
        return "Error: user not found"
    user = data.writable_user(user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return json.dumps(user)
