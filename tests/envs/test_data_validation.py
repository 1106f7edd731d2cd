"""Corrupt database records are rejected at load time with the file, the record and the field named (issue 13
items 7 and 8)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.retail import RetailEnv
from josh.envs.retail.db import RetailDataError
from josh.envs.toolwoz.data import SHIPPED_MINI
from josh.envs.toolwoz.db import DBError, ToolWOZDB


def _toolwoz_copy(tmp_path: Path, domain: str, change) -> tuple[Path, str]:
    data = tmp_path / "data"
    shutil.copytree(SHIPPED_MINI, data)
    table = data / "db" / f"{domain}_db.json"
    rows = json.loads(table.read_text())
    change(rows[3])
    table.write_text(json.dumps(rows))
    return data, rows[3].get("name", "")


@pytest.mark.parametrize(
    ("domain", "column", "value", "shown"),
    [("hotel", "stars", ["4"], '["4"]'), ("hotel", "area", None, "null"), ("restaurant", "food", {"a": 1}, '{"a": 1}')],
)
def test_toolwoz_rows_with_wrong_types_are_rejected(tmp_path, domain, column, value, shown):
    data, name = _toolwoz_copy(tmp_path, domain, lambda row: row.__setitem__(column, value))
    with pytest.raises(DBError) as caught:
        ToolWOZDB.load(data / "db")
    table = data / "db" / f"{domain}_db.json"
    assert str(caught.value) == f"{table}: record 3 ({name}): {column}={shown} is not a string or a number"
    result = CliRunner().invoke(app, ["eval", "--agent", "oracle", "--data", str(data), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and f"{column}={shown} is not a string or a number" in " ".join(result.output.split())


USERS = {
    "ann_lee_1": {
        "name": {"first_name": "Ann", "last_name": "Lee"},
        "address": {"address1": "1 Road", "address2": "", "city": "X", "country": "USA", "state": "NY", "zip": "10001"},
        "email": "ann@example.com",
        "payment_methods": {"gift_card_1": {"source": "gift_card", "id": "gift_card_1", "balance": 20.0}},
        "orders": ["#W1"],
    }
}
ORDERS = {
    "#W1": {
        "order_id": "#W1",
        "user_id": "ann_lee_1",
        "address": USERS["ann_lee_1"]["address"],
        "items": [{"name": "Lamp", "product_id": "p1", "item_id": "i1", "price": 10.5, "options": {"color": "red"}}],
        "fulfillments": [],
        "status": "pending",
        "payment_history": [{"transaction_type": "payment", "amount": 10.5, "payment_method_id": "gift_card_1"}],
    }
}
PRODUCTS = {
    "p1": {
        "name": "Lamp",
        "product_id": "p1",
        "variants": {"i1": {"item_id": "i1", "options": {"color": "red"}, "available": True, "price": 10.5}},
    }
}


def _retail(folder: Path, users=USERS, orders=ORDERS, products=PRODUCTS) -> Path:
    folder.mkdir()
    for name, records in (("users.json", users), ("orders.json", orders), ("products.json", products)):
        (folder / name).write_text(json.dumps(records))
    (folder / "policy.md").write_text("Be helpful.")
    return folder


def _changed(records: dict, record_id: str, change) -> dict:
    out = copy.deepcopy(records)
    change(out[record_id])
    return out


def test_a_valid_retail_folder_loads(tmp_path):
    env = RetailEnv(_retail(tmp_path / "ok"))
    assert env.db.user_by_email == {"ann@example.com": "ann_lee_1"}


@pytest.mark.parametrize(
    ("file", "records", "message"),
    [
        ("users.json", _changed(USERS, "ann_lee_1", lambda u: u.pop("email")), "user ann_lee_1: email: Field required"),
        (
            "users.json",
            _changed(USERS, "ann_lee_1", lambda u: u["payment_methods"]["gift_card_1"].pop("balance")),
            "user ann_lee_1: payment_methods.gift_card_1: Value error, a gift card needs a balance",
        ),
        ("orders.json", _changed(ORDERS, "#W1", lambda o: o.__setitem__("items", "oops")), "order #W1: items: Input"),
        ("orders.json", _changed(ORDERS, "#W1", lambda o: o.pop("status")), "order #W1: status: Field required"),
        (
            "products.json",
            _changed(PRODUCTS, "p1", lambda p: p["variants"]["i1"].__setitem__("price", "10.5")),
            "product p1: variants.i1.price: Input should be a valid number",
        ),
    ],
)
def test_corrupt_retail_records_name_file_record_and_field(tmp_path, file, records, message):
    kind = file.removesuffix("s.json")
    folder = _retail(tmp_path / "bad", **{kind + "s": records})
    with pytest.raises(RetailDataError) as caught:
        RetailEnv(folder)
    assert str(caught.value).startswith(f"{folder / file}: {message}")
    assert "\n" not in str(caught.value)
