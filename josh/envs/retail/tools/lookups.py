"""Retail tools that read the database. The shared ones (``calculate``, ``get_user_details``,
``think``, the transfer) are in ``josh.envs.taubench.tools``."""

from __future__ import annotations

import json

from josh.envs.retail.state import RetailState


def find_user_id_by_email(data: RetailState, /, email: str) -> str:
    """The id of the user with this e-mail (case-insensitive)."""
    return data.db.user_by_email.get(email.lower(), "Error: user not found")


def find_user_id_by_name_zip(data: RetailState, /, first_name: str, last_name: str, zip: str) -> str:
    """The first user (in database order) with this name (case-insensitive) and current zip code.

    No tool renames a user, so the name index of the pristine database stays valid; the zip is read from the
    current record because ``modify_user_address`` can change it."""
    key = (first_name.lower(), last_name.lower())
    for user_id in data.db.users_by_name.get(key, ()):
        user = data.user(user_id)
        if user is not None and user["address"]["zip"] == zip:
            return user_id
    return "Error: user not found"


def get_order_details(data: RetailState, /, order_id: str) -> str:
    order = data.order(order_id)
    return json.dumps(order) if order is not None else "Error: order not found"


def get_product_details(data: RetailState, /, product_id: str) -> str:
    product = data.db.products.get(product_id)
    return json.dumps(product) if product is not None else "Error: product not found"


def list_all_product_types(data: RetailState, /) -> str:
    """All product names mapped to their product ids, sorted by name."""
    return data.db.product_types_json
