"""OpenAI function schemas of the 16 retail tools (descriptions written for this project)."""

from __future__ import annotations

from typing import Any

from josh.envs.taubench.tools import STRING, THINK, TRANSFER, calculate_schema, function_schema

_STR = STRING
_IDS = {"type": "array", "items": _STR}
_fn = function_schema

_ORDER_ID = (_STR, "The order id, including its leading '#', e.g. '#W0000000'.")
_USER_ID = (_STR, "The user id, e.g. 'sara_doe_496'.")
_METHOD_ID = (_STR, "A payment method id from the user's profile, e.g. 'gift_card_0000000' or 'credit_card_0000000'.")
_ADDRESS = {
    "address1": (_STR, "First address line, e.g. '123 Main St'."),
    "address2": (_STR, "Second address line (apartment, suite), or an empty string."),
    "city": (_STR, "City, e.g. 'San Francisco'."),
    "state": (_STR, "State code, e.g. 'CA'."),
    "country": (_STR, "Country, e.g. 'USA'."),
    "zip": (_STR, "Five-digit zip code, e.g. '12345'."),
}


def _swap(verb: str) -> dict[str, tuple[dict[str, Any], str]]:
    """The arguments of an item swap (modify a pending order's items, exchange a delivered order's)."""
    return {
        "order_id": _ORDER_ID,
        "item_ids": (_IDS, f"Item ids to {verb}; an id may repeat if the order holds it several times."),
        "new_item_ids": (_IDS, "The new item ids, in the same order and of the same products as item_ids."),
        "payment_method_id": (_METHOD_ID[0], "Payment method that pays or receives the price difference."),
    }


SCHEMAS: list[dict[str, Any]] = [
    _fn(
        "find_user_id_by_email",
        "Look up the id of the user with the given e-mail address, to authenticate them.",
        {"email": (_STR, "The user's e-mail address, e.g. 'someone@example.com'.")},
    ),
    _fn(
        "find_user_id_by_name_zip",
        "Look up a user id by first name, last name and zip code. Try the e-mail lookup first; use this one only "
        "when the user cannot give an e-mail or it was not found.",
        {
            "first_name": (_STR, "First name, e.g. 'John'."),
            "last_name": (_STR, "Last name, e.g. 'Doe'."),
            "zip": (_STR, "Zip code, e.g. '12345'."),
        },
    ),
    _fn(
        "get_user_details",
        "Return a user's profile: name, default address, e-mail, payment methods (with gift card balances) and "
        "order ids.",
        {"user_id": _USER_ID},
    ),
    _fn(
        "get_order_details",
        "Return an order: status, items with prices and options, shipping address, fulfillments and payments.",
        {"order_id": _ORDER_ID},
    ),
    _fn(
        "get_product_details",
        "Return a product type with all its variants (item ids, options, availability, prices).",
        {"product_id": (_STR, "The product id (not an item id), e.g. '6086499569'.")},
    ),
    _fn(
        "list_all_product_types",
        "List the names of all product types in the store, each with its product id.",
        {},
    ),
    calculate_schema("(12.5 + 3) * 2"),
    THINK,
    TRANSFER,
    _fn(
        "cancel_pending_order",
        "Cancel a pending order after the user confirmed order and reason. Payments are refunded: at once to "
        "gift cards, in 5-7 business days to other methods.",
        {"order_id": _ORDER_ID, "reason": (_STR, "Either 'no longer needed' or 'ordered by mistake'.")},
    ),
    _fn(
        "modify_pending_order_address",
        "Change the shipping address of a pending order, after the user confirmed it.",
        {"order_id": _ORDER_ID, **_ADDRESS},
    ),
    _fn(
        "modify_pending_order_payment",
        "Pay a pending order with a different payment method of the user, after they confirmed it. The old "
        "payment is refunded (at once to a gift card). A gift card must cover the whole order.",
        {"order_id": _ORDER_ID, "payment_method_id": _METHOD_ID},
    ),
    _fn(
        "modify_pending_order_items",
        "Replace items of a pending order with other available options of the same products. Allowed once per "
        "order, so collect every item to change first and get the user's confirmation.",
        _swap("replace"),
    ),
    _fn(
        "return_delivered_order_items",
        "Request a return of items of a delivered order, after the user confirmed order, items and refund "
        "method. The user then gets an e-mail with return instructions.",
        {
            "order_id": _ORDER_ID,
            "item_ids": (_IDS, "Item ids to return; an id may repeat if the order holds it several times."),
            "payment_method_id": (_STR, "Refund method: the order's original payment method or a gift card."),
        },
    ),
    _fn(
        "exchange_delivered_order_items",
        "Request an exchange of items of a delivered order for other available options of the same products. "
        "Allowed once per order, so collect every item to exchange first and get the user's confirmation.",
        _swap("exchange"),
    ),
    _fn(
        "modify_user_address",
        "Change a user's default address, after the user confirmed it.",
        {"user_id": _USER_ID, **_ADDRESS},
    ),
]
