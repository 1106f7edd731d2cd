"""Rules of the 16 retail tools: preconditions, effects, exact error strings, and untouched state on failure."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from josh.envs.retail import RetailEnv, RetailState
from josh.types import ErrorCategory, Task, ToolCall

ADDRESS = {
    "address1": "1 Test Way",
    "address2": "Unit 2",
    "city": "Austin",
    "state": "TX",
    "country": "USA",
    "zip": "73301",
}


@pytest.fixture(scope="module")
def env(shared_data) -> RetailEnv:
    return RetailEnv(shared_data / "taubench" / "retail")


@pytest.fixture
def state(env: RetailEnv) -> RetailState:
    return env.reset(Task(id="probe", env="retail", details={"user_id": "", "instruction": ""}))


def call(env: RetailEnv, state: RetailState, name: str, /, **arguments):
    return env.call(state, ToolCall(name=name, arguments=arguments))


def swap(env: RetailEnv, state: RetailState, tool: str, order_id: str, old: list, new: list, method: str):
    """Call an item-swap tool (modify a pending order's items, or exchange a delivered order's)."""
    return call(env, state, tool, order_id=order_id, item_ids=old, new_item_ids=new, payment_method_id=method)


def unchanged(state: RetailState) -> bool:
    return state.changes() == {"users": {}, "orders": {}}


def order_where(env: RetailEnv, predicate) -> dict:
    return next(o for o in env.db.orders.values() if predicate(o))


def methods_of(env: RetailEnv, order: dict) -> dict:
    return env.db.users[order["user_id"]]["payment_methods"]


def other_method(env: RetailEnv, order: dict, source: str) -> str | None:
    current = order["payment_history"][0]["payment_method_id"]
    return next((m for m, v in methods_of(env, order).items() if v["source"] == source and m != current), None)


def foreign_method(env: RetailEnv, order: dict) -> str:
    return next(m for u in env.db.users.values() for m in u["payment_methods"] if m not in methods_of(env, order))


def swap_pair(env: RetailEnv, order: dict) -> tuple[str, str] | None:
    """An item of the order and a different available variant of its product."""
    for item in order["items"]:
        for vid, variant in env.db.products[item["product_id"]]["variants"].items():
            if vid != item["item_id"] and variant["available"]:
                return item["item_id"], vid
    return None


def test_registry_has_sixteen_schemas(env: RetailEnv) -> None:
    names = [t["function"]["name"] for t in env.tools]
    assert len(names) == len(set(names)) == 16
    for schema in env.tools:
        params = schema["function"]["parameters"]
        assert params["required"] == list(params["properties"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_string_arguments_never_raise_and_errors_change_nothing(env: RetailEnv, data) -> None:
    """Every tool, fed real ids mixed with junk: a result string always comes back; an error leaves no trace."""
    order = data.draw(st.sampled_from(list(env.db.orders.values())[:50]))
    words = st.sampled_from(
        [
            order["order_id"],
            order["user_id"],
            *methods_of(env, order),
            *(i["item_id"] for i in order["items"]),
            "no longer needed",
            "",
        ]
    ) | st.text(max_size=8)
    tool = data.draw(st.sampled_from(env.tools))["function"]
    arguments = {
        key: data.draw(st.lists(words, max_size=3) if spec["type"] == "array" else words)
        for key, spec in tool["parameters"]["properties"].items()
    }
    state = env.reset(Task(id="fuzz", env="retail", details={"user_id": "", "instruction": ""}))
    result = call(env, state, tool["name"], **arguments)
    assert isinstance(result.content, str)
    if result.error is not None:
        assert result.content.startswith("Error: ") and unchanged(state)


def test_lookups_by_email_and_name_zip(env: RetailEnv, state: RetailState) -> None:
    user_id, user = next(iter(env.db.users.items()))
    assert call(env, state, "find_user_id_by_email", email=user["email"].upper()).content == user_id
    assert call(env, state, "find_user_id_by_email", email="nobody@example.com").content == "Error: user not found"
    name, zip_code = user["name"], user["address"]["zip"]
    found = call(
        env,
        state,
        "find_user_id_by_name_zip",
        first_name=name["first_name"].upper(),
        last_name=name["last_name"].lower(),
        zip=zip_code,
    )
    assert found.content == user_id and found.error is None
    wrong = call(
        env, state, "find_user_id_by_name_zip", first_name=name["first_name"], last_name=name["last_name"], zip="00000"
    )
    assert (wrong.content, wrong.error) == ("Error: user not found", ErrorCategory.TOOL_ERROR)


def test_name_zip_lookup_follows_a_changed_address(env: RetailEnv, state: RetailState) -> None:
    user_id, user = next(iter(env.db.users.items()))
    name = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"]}
    assert call(env, state, "modify_user_address", user_id=user_id, **ADDRESS).error is None
    assert call(env, state, "find_user_id_by_name_zip", **name, zip=ADDRESS["zip"]).content == user_id
    assert (
        call(env, state, "find_user_id_by_name_zip", **name, zip=user["address"]["zip"]).content
        == "Error: user not found"
    )


def test_detail_lookups(env: RetailEnv, state: RetailState) -> None:
    user_id = next(iter(env.db.users))
    order_id = next(iter(env.db.orders))
    product_id = next(iter(env.db.products))
    assert json.loads(call(env, state, "get_user_details", user_id=user_id).content) == env.db.users[user_id]
    assert json.loads(call(env, state, "get_order_details", order_id=order_id).content) == env.db.orders[order_id]
    assert (
        json.loads(call(env, state, "get_product_details", product_id=product_id).content)
        == env.db.products[product_id]
    )
    assert call(env, state, "get_user_details", user_id="no_one_1").content == "Error: user not found"
    assert call(env, state, "get_order_details", order_id=order_id.lstrip("#")).content == "Error: order not found"
    assert call(env, state, "get_product_details", product_id="6086499569").content == "Error: product not found"
    assert unchanged(state)


def test_list_all_product_types(env: RetailEnv, state: RetailState) -> None:
    listing = json.loads(call(env, state, "list_all_product_types").content)
    assert list(listing) == sorted(listing) and len(listing) == len(env.db.products)
    assert all(env.db.products[pid]["name"] == name for name, pid in listing.items())


@given(
    st.lists(st.integers(-999, 999), min_size=1, max_size=6), st.lists(st.sampled_from("+-*"), min_size=5, max_size=5)
)
def test_calculate_matches_python_arithmetic(env: RetailEnv, numbers: list[int], ops: list[str]) -> None:
    expression = " ".join(f"{op} ({n})" if i else f"({n})" for i, (n, op) in enumerate(zip(numbers, ops, strict=False)))
    state = env.reset(Task(id="calc", env="retail", details={"user_id": "", "instruction": ""}))
    expected = float(eval(expression, {"__builtins__": {}}))  # the test's oracle over a digits-and-operators string
    assert call(env, state, "calculate", expression=expression).content == str(round(expected, 2))


def test_calculate_errors(env: RetailEnv, state: RetailState) -> None:
    assert call(env, state, "calculate", expression="(2 + 2) / 4").content == "1.0"
    assert call(env, state, "calculate", expression="10 / 3").content == "3.33"
    assert call(env, state, "calculate", expression="import os").content == "Error: invalid characters in expression"
    assert call(env, state, "calculate", expression="1 / 0").content == "Error: division by zero"
    assert call(env, state, "calculate", expression="2 +").content.startswith("Error: invalid syntax")
    assert call(env, state, "calculate", expression="9 ** 9 ** 9").error == ErrorCategory.TOOL_ERROR


def test_think_and_transfer(env: RetailEnv, state: RetailState) -> None:
    assert call(env, state, "think", thought="plan").content == ""
    result = call(env, state, "transfer_to_human_agents", summary="needs a human")
    assert (result.content, result.terminal, state.terminated) == ("Transfer successful", True, True)
    assert call(env, state, "think", thought="after").error == ErrorCategory.TOOL_ERROR


@pytest.mark.parametrize(
    ("name", "arguments", "category"),
    [
        ("teleport_order", {}, ErrorCategory.UNKNOWN_TOOL),
        ("get_order_details", {"order_id": "#W0000000", "verbose": "yes"}, ErrorCategory.UNKNOWN_ARGUMENT),
        ("cancel_pending_order", {"order_id": "#W0000000"}, ErrorCategory.MALFORMED),
        ("get_order_details", "{not json", ErrorCategory.MALFORMED),
        ("get_order_details", {"order_id": 2611340}, ErrorCategory.INVALID_VALUE),
        (
            "return_delivered_order_items",
            {"order_id": "#W1", "item_ids": "123", "payment_method_id": "x"},
            ErrorCategory.INVALID_VALUE,
        ),
    ],
)
def test_bad_calls_are_reported_not_raised(env: RetailEnv, state: RetailState, name, arguments, category) -> None:
    result = env.call(state, ToolCall(name=name, arguments=arguments))
    assert result.error == category and result.content.startswith(("Error:", "Unknown action"))
    assert unchanged(state) and state.log[-1].error == category


def test_cancel_pending_order(env: RetailEnv, state: RetailState) -> None:
    order = order_where(
        env, lambda o: o["status"] == "pending" and "gift_card" in o["payment_history"][0]["payment_method_id"]
    )
    oid, method = order["order_id"], order["payment_history"][0]["payment_method_id"]
    other = order_where(env, lambda o: o["status"] != "pending")["order_id"]
    assert (
        call(env, state, "cancel_pending_order", order_id="#W0", reason="no longer needed").content
        == "Error: order not found"
    )
    assert (
        call(env, state, "cancel_pending_order", order_id=other, reason="bogus").content
        == "Error: non-pending order cannot be cancelled"
    )
    assert call(env, state, "cancel_pending_order", order_id=oid, reason="too slow").content == "Error: invalid reason"
    assert unchanged(state)
    done = json.loads(call(env, state, "cancel_pending_order", order_id=oid, reason="ordered by mistake").content)
    assert (done["status"], done["cancel_reason"]) == ("cancelled", "ordered by mistake")
    paid = order["payment_history"][0]["amount"]
    assert done["payment_history"][-1] == {"transaction_type": "refund", "amount": paid, "payment_method_id": method}
    before = methods_of(env, order)[method]["balance"]
    assert state.user(order["user_id"])["payment_methods"][method]["balance"] == round(before + paid, 2)
    assert (
        call(env, state, "cancel_pending_order", order_id=oid, reason="no longer needed").content
        == "Error: non-pending order cannot be cancelled"
    )


def test_modify_pending_order_address(env: RetailEnv, state: RetailState) -> None:
    oid = order_where(env, lambda o: o["status"] == "pending")["order_id"]
    delivered = order_where(env, lambda o: o["status"] == "delivered")["order_id"]
    assert (
        call(env, state, "modify_pending_order_address", order_id=delivered, **ADDRESS).content
        == "Error: non-pending order cannot be modified"
    )
    assert unchanged(state)
    for city in ("Austin", "Dallas"):
        result = json.loads(
            call(env, state, "modify_pending_order_address", order_id=oid, **{**ADDRESS, "city": city}).content
        )
        assert result["address"] == {**ADDRESS, "city": city} and result["status"] == "pending"


def test_modify_pending_order_payment(env: RetailEnv, state: RetailState) -> None:
    order = order_where(
        env,
        lambda o: (
            o["status"] == "pending"
            and "gift_card" in o["payment_history"][0]["payment_method_id"]
            and other_method(env, o, "credit_card")
        ),
    )
    oid, old = order["order_id"], order["payment_history"][0]["payment_method_id"]
    new, amount = other_method(env, order, "credit_card"), order["payment_history"][0]["amount"]
    assert (
        call(
            env, state, "modify_pending_order_payment", order_id=oid, payment_method_id=foreign_method(env, order)
        ).content
        == "Error: payment method not found"
    )
    assert (
        call(env, state, "modify_pending_order_payment", order_id=oid, payment_method_id=old).content
        == "Error: the new payment method should be different from the current one"
    )
    assert unchanged(state)
    history = json.loads(call(env, state, "modify_pending_order_payment", order_id=oid, payment_method_id=new).content)[
        "payment_history"
    ]
    assert history[1:] == [
        {"transaction_type": "payment", "amount": amount, "payment_method_id": new},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old},
    ]
    balance = methods_of(env, order)[old]["balance"]
    assert state.user(order["user_id"])["payment_methods"][old]["balance"] == round(balance + amount, 2)
    again = call(env, state, "modify_pending_order_payment", order_id=oid, payment_method_id=old)
    assert again.content == "Error: there should be exactly one payment for a pending order"


def test_payment_change_to_a_small_gift_card_fails(env: RetailEnv, state: RetailState) -> None:
    order = order_where(
        env,
        lambda o: (
            o["status"] == "pending"
            and any(
                v["source"] == "gift_card"
                and v["balance"] < o["payment_history"][0]["amount"]
                and m != o["payment_history"][0]["payment_method_id"]
                for m, v in methods_of(env, o).items()
            )
        ),
    )
    card = next(
        m
        for m, v in methods_of(env, order).items()
        if v["source"] == "gift_card" and v["balance"] < order["payment_history"][0]["amount"]
    )
    result = call(env, state, "modify_pending_order_payment", order_id=order["order_id"], payment_method_id=card)
    assert result.content == "Error: insufficient gift card balance to pay for the order" and unchanged(state)


def gift_card_swap(env: RetailEnv, enough: bool, status: str = "pending") -> tuple[dict, str, str, str, float]:
    """An order in ``status``, an item swap, and a gift card of its owner that does (or does not) cover the difference."""
    for order in env.db.orders.values():
        pair = swap_pair(env, order) if order["status"] == status else None
        if pair is None:
            continue
        item = next(i for i in order["items"] if i["item_id"] == pair[0])
        diff = env.db.products[item["product_id"]]["variants"][pair[1]]["price"] - item["price"]
        for method_id, method in methods_of(env, order).items():
            if method["source"] == "gift_card" and (method["balance"] >= diff) == enough:
                return order, pair[0], pair[1], method_id, diff
    raise LookupError("no such order in the data")


def test_modify_pending_order_items_checks(env: RetailEnv, state: RetailState) -> None:
    order, old_item, new_item, card, _ = gift_card_swap(env, enough=False)
    args = {"order_id": order["order_id"], "payment_method_id": order["payment_history"][0]["payment_method_id"]}
    assert (
        call(env, state, "modify_pending_order_items", item_ids=["0000000000"], new_item_ids=[new_item], **args).content
        == "Error: 0000000000 not found"
    )
    assert (
        call(
            env, state, "modify_pending_order_items", item_ids=[old_item] * 6, new_item_ids=[new_item] * 6, **args
        ).content
        == f"Error: {old_item} not found"
    )
    assert (
        call(env, state, "modify_pending_order_items", item_ids=[old_item], new_item_ids=[], **args).content
        == "Error: the number of items to be exchanged should match"
    )
    assert (
        call(env, state, "modify_pending_order_items", item_ids=[old_item], new_item_ids=["0000000000"], **args).content
        == "Error: new item 0000000000 not found or available"
    )
    args["payment_method_id"] = foreign_method(env, order)
    assert (
        call(env, state, "modify_pending_order_items", item_ids=[old_item], new_item_ids=[new_item], **args).content
        == "Error: payment method not found"
    )
    args["payment_method_id"] = card
    assert (
        call(env, state, "modify_pending_order_items", item_ids=[old_item], new_item_ids=[new_item], **args).content
        == "Error: insufficient gift card balance to pay for the new item"
    )
    assert unchanged(state)


def test_modify_pending_order_items_effects(env: RetailEnv, state: RetailState) -> None:
    order, old_item, new_item, card, diff = gift_card_swap(env, enough=True)
    oid = order["order_id"]
    balance = methods_of(env, order)[card]["balance"]
    done = json.loads(swap(env, state, "modify_pending_order_items", oid, [old_item], [new_item], card).content)
    assert done["status"] == "pending (item modified)"
    variant = env.db.products[next(i for i in order["items"] if i["item_id"] == old_item)["product_id"]]["variants"][
        new_item
    ]
    swapped = next(i for i in done["items"] if i["item_id"] == new_item)
    assert (swapped["price"], swapped["options"]) == (variant["price"], variant["options"])
    assert done["payment_history"][-1] == {
        "transaction_type": "payment" if diff > 0 else "refund",
        "amount": abs(diff),
        "payment_method_id": card,
    }
    assert state.user(order["user_id"])["payment_methods"][card]["balance"] == round(balance - diff, 2)
    assert (
        call(env, state, "cancel_pending_order", order_id=oid, reason="no longer needed").content
        == "Error: non-pending order cannot be cancelled"
    )
    again = swap(env, state, "modify_pending_order_items", oid, [new_item], [old_item], card)
    assert again.content == "Error: non-pending order cannot be modified"


def test_duplicated_items_are_swapped_in_order(env: RetailEnv, state: RetailState) -> None:
    order = next(
        (
            o
            for o in env.db.orders.values()
            if o["status"] == "pending" and max(Counter(i["item_id"] for i in o["items"]).values()) > 1
        ),
        None,
    )
    assert order is not None, "the retail data holds pending orders with a duplicated item"
    dup = next(k for k, c in Counter(i["item_id"] for i in order["items"]).items() if c > 1)
    item = next(i for i in order["items"] if i["item_id"] == dup)
    new = next(v for v, x in env.db.products[item["product_id"]]["variants"].items() if x["available"] and v != dup)
    result = swap(
        env,
        state,
        "modify_pending_order_items",
        order["order_id"],
        [dup],
        [new],
        order["payment_history"][0]["payment_method_id"],
    )
    ids = [i["item_id"] for i in json.loads(result.content)["items"]]
    first = [i["item_id"] for i in order["items"]].index(dup)
    assert ids[first] == new and dup in ids[first + 1 :]


def test_return_delivered_order_items(env: RetailEnv, state: RetailState) -> None:
    order = order_where(env, lambda o: o["status"] == "delivered" and other_method(env, o, "paypal") or False)
    oid, items = order["order_id"], [i["item_id"] for i in order["items"]]
    original = order["payment_history"][0]["payment_method_id"]
    pending = order_where(env, lambda o: o["status"] == "pending")["order_id"]
    refused = [
        (pending, items, original, "Error: non-delivered order cannot be returned"),
        (oid, items, foreign_method(env, order), "Error: payment method not found"),
        (
            oid,
            items,
            other_method(env, order, "paypal"),
            "Error: payment method should be either the original payment method or a gift card",
        ),
        (oid, [*items, items[0]], original, "Error: some item not found"),
    ]
    for order_id, item_ids, method, error in refused:
        arguments = {"order_id": order_id, "item_ids": item_ids, "payment_method_id": method}
        assert call(env, state, "return_delivered_order_items", **arguments).content == error
    assert unchanged(state)
    done = json.loads(
        call(
            env, state, "return_delivered_order_items", order_id=oid, item_ids=items[::-1], payment_method_id=original
        ).content
    )
    assert (done["status"], done["return_items"], done["return_payment_method_id"]) == (
        "return requested",
        sorted(items),
        original,
    )
    assert done["payment_history"] == order["payment_history"]


def test_exchange_delivered_order_items(env: RetailEnv, state: RetailState) -> None:
    order = order_where(env, lambda o: o["status"] == "delivered" and swap_pair(env, o))
    oid, (old_item, new_item) = order["order_id"], swap_pair(env, order)
    method = order["payment_history"][0]["payment_method_id"]
    pending = order_where(env, lambda o: o["status"] == "pending")["order_id"]
    assert (
        swap(env, state, "exchange_delivered_order_items", pending, [old_item], [new_item], method).content
        == "Error: non-delivered order cannot be exchanged"
    )
    assert (
        swap(env, state, "exchange_delivered_order_items", oid, [old_item], [new_item, new_item], method).content
        == "Error: the number of items to be exchanged should match"
    )
    assert unchanged(state)
    done = json.loads(swap(env, state, "exchange_delivered_order_items", oid, [old_item], [new_item], method).content)
    item = next(i for i in order["items"] if i["item_id"] == old_item)
    diff = round(env.db.products[item["product_id"]]["variants"][new_item]["price"] - item["price"], 2)
    assert done["status"] == "exchange requested" and done["exchange_price_difference"] == diff
    assert (done["exchange_items"], done["exchange_new_items"], done["exchange_payment_method_id"]) == (
        [old_item],
        [new_item],
        method,
    )
    assert done["items"] == order["items"]
    assert (
        call(
            env, state, "return_delivered_order_items", order_id=oid, item_ids=[old_item], payment_method_id=method
        ).content
        == "Error: non-delivered order cannot be returned"
    )


def test_exchange_needs_a_gift_card_that_covers_the_difference(env: RetailEnv, state: RetailState) -> None:
    order, old_item, new_item, card, _ = gift_card_swap(env, enough=False, status="delivered")
    result = swap(env, state, "exchange_delivered_order_items", order["order_id"], [old_item], [new_item], card)
    assert result.content == "Error: insufficient gift card balance to pay for the price difference" and unchanged(
        state
    )


def test_modify_user_address(env: RetailEnv, state: RetailState) -> None:
    user_id, user = next((u, v) for u, v in env.db.users.items() if v["orders"])
    assert call(env, state, "modify_user_address", user_id="ghost_0000", **ADDRESS).content == "Error: user not found"
    assert unchanged(state)
    done = json.loads(call(env, state, "modify_user_address", user_id=user_id, **ADDRESS).content)
    assert done["address"] == ADDRESS and done["orders"] == user["orders"]
    assert state.changes()["orders"] == {} and env.db.users[user_id]["address"] == user["address"]
