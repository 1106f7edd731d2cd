"""Retail tools that read the database or do nothing to it: lookups, arithmetic, scratchpad and transfer."""

from __future__ import annotations

import ast
import json
import operator

from josh.envs.retail.state import RetailState

ALLOWED_EXPRESSION_CHARS = frozenset("0123456789+-*/(). ")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


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


def get_user_details(data: RetailState, /, user_id: str) -> str:
    user = data.user(user_id)
    return json.dumps(user) if user is not None else "Error: user not found"


def get_order_details(data: RetailState, /, order_id: str) -> str:
    order = data.order(order_id)
    return json.dumps(order) if order is not None else "Error: order not found"


def get_product_details(data: RetailState, /, product_id: str) -> str:
    product = data.db.products.get(product_id)
    return json.dumps(product) if product is not None else "Error: product not found"


def list_all_product_types(data: RetailState, /) -> str:
    """All product names mapped to their product ids, sorted by name."""
    return data.db.product_types_json


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError("only + - * / and parentheses are supported")


def calculate(data: RetailState, /, expression: str) -> str:
    """Evaluate arithmetic (digits, + - * / parentheses, dots, spaces) and round to cents."""
    if not all(char in ALLOWED_EXPRESSION_CHARS for char in expression):
        return "Error: invalid characters in expression"
    try:
        return str(round(float(_evaluate(ast.parse(expression, filename="<string>", mode="eval"))), 2))
    except (SyntaxError, ValueError, ArithmeticError) as exc:
        return f"Error: {exc}"


def think(data: RetailState, /, thought: str) -> str:
    """A scratchpad: records nothing and returns nothing."""
    return ""


def transfer_to_human_agents(data: RetailState, /, summary: str) -> str:
    """Hand the user over to a human; the environment ends the conversation."""
    return "Transfer successful"
