"""τ-bench tools: the tool wrapper with its schema check, the schema builders, and the tools every domain shares
(``calculate``, ``get_user_details``, ``think``, ``transfer_to_human_agents``).

The argument check runs before any tool, so a call with a wrong type never reaches the database: unknown and
missing arguments first, then each value against its JSON schema (types, enums, required keys of nested objects;
keys a nested object does not declare are kept, as τ-bench keeps them).
"""

from __future__ import annotations

import ast
import json
import operator
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from josh.types import ErrorCategory

Properties = dict[str, tuple[dict[str, Any], str]]
STRING = {"type": "string"}
_KINDS = {"string": "a string", "integer": "an integer", "number": "a number", "array": "a list", "object": "an object"}


def object_schema(properties: Properties) -> dict[str, Any]:
    """An object schema; every listed property is required, as in the benchmark."""
    props = {key: {**kind, "description": text} for key, (kind, text) in properties.items()}
    return {"type": "object", "properties": props, "required": list(props)}


def function_schema(name: str, description: str, properties: Properties) -> dict[str, Any]:
    """One OpenAI function schema whose parameters are all required."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": object_schema(properties)},
    }


def calculate_schema(example: str) -> dict[str, Any]:
    """The ``calculate`` schema, with a domain's own example expression."""
    return function_schema(
        "calculate",
        "Evaluate an arithmetic expression and return the result rounded to two decimals.",
        {"expression": (STRING, f"Numbers, + - * /, parentheses and spaces only, e.g. '{example}'.")},
    )


THINK = function_schema(
    "think",
    "Write down your reasoning. Nothing is looked up or changed; use it for planning or checking a policy.",
    {"thought": (STRING, "Your reasoning.")},
)
TRANSFER = function_schema(
    "transfer_to_human_agents",
    "Hand the user over to a human agent, with a summary of the issue. Only when the user explicitly asks "
    "for a human, or the request cannot be handled with the available tools and policy. Ends the conversation.",
    {"summary": (STRING, "A short summary of the user's issue.")},
)


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind in ("integer", "number"):
        allowed = int if kind == "integer" else (int, float)
        return isinstance(value, allowed) and not isinstance(value, bool)
    return isinstance(value, list if kind == "array" else dict)


def value_problem(value: Any, spec: dict[str, Any], where: str) -> str | None:
    """What is wrong with ``value`` under the JSON schema ``spec`` (``where`` names it), or ``None``."""
    if not _type_ok(value, spec["type"]):
        return f"'{where}' must be {_KINDS[spec['type']]}"
    if "enum" in spec and value not in spec["enum"]:
        return f"'{where}' must be one of {', '.join(spec['enum'])}"
    if spec["type"] == "array":
        for index, item in enumerate(value):
            if (problem := value_problem(item, spec["items"], f"{where}[{index}]")) is not None:
                return problem
    if spec["type"] == "object":
        for key in spec.get("required", ()):
            if key not in value:
                return f"'{where}' lacks the key '{key}'"
        for key, inner in spec.get("properties", {}).items():
            if (problem := value_problem(value[key], inner, f"{where}.{key}")) is not None:
                return problem
    return None


@dataclass(frozen=True)
class Tool:
    """One tool: its function ``fn(state, **arguments)``, its schema, and whether it writes or ends the
    conversation."""

    name: str
    fn: Callable[..., str]
    schema: dict[str, Any]
    writes: bool = False
    terminal: bool = False

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return self.schema["function"]["parameters"]["properties"]

    def check(self, arguments: dict[str, Any]) -> tuple[str, ErrorCategory] | None:
        """The error text and category for arguments that do not fit the schema, else ``None``."""
        unknown = [key for key in arguments if key not in self.parameters]
        if unknown:
            return (
                f"Error: {self.name}() got an unexpected keyword argument '{unknown[0]}'",
                ErrorCategory.UNKNOWN_ARGUMENT,
            )
        missing = [key for key in self.parameters if key not in arguments]
        if missing:
            names = ", ".join(f"'{key}'" for key in missing)
            return f"Error: {self.name}() missing required argument(s): {names}", ErrorCategory.MALFORMED
        for key, spec in self.parameters.items():
            if (problem := value_problem(arguments[key], spec, key)) is not None:
                return f"Error: {self.name}() argument {problem}", ErrorCategory.INVALID_VALUE
        return None

    def __call__(self, state: Any, arguments: dict[str, Any]) -> str:
        return self.fn(state, **arguments)


TERMINAL_TOOLS = frozenset({"transfer_to_human_agents"})


def make_registry(schemas: Iterable[dict[str, Any]], reads: ModuleType, writes: ModuleType) -> dict[str, Tool]:
    """Tool name -> ``Tool``, in schema order: each function comes from the domain's ``writes`` module (a tool that
    changes the database), its ``reads`` module, or the shared tools of this module."""
    shared = sys.modules[__name__]
    tools: dict[str, Tool] = {}
    for schema in schemas:
        name = schema["function"]["name"]
        fn = next(getattr(m, name) for m in (writes, reads, shared) if hasattr(m, name))
        tools[name] = Tool(name, fn, schema, writes=hasattr(writes, name), terminal=name in TERMINAL_TOOLS)
    return tools


ALLOWED_EXPRESSION_CHARS = frozenset("0123456789+-*/(). ")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


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


def calculate(data: Any, /, expression: str) -> str:
    """Evaluate arithmetic (digits, + - * / parentheses, dots, spaces) and round to cents."""
    if not all(char in ALLOWED_EXPRESSION_CHARS for char in expression):
        return "Error: invalid characters in expression"
    try:
        return str(round(float(_evaluate(ast.parse(expression, filename="<string>", mode="eval"))), 2))
    except (SyntaxError, ValueError, ArithmeticError) as exc:
        return f"Error: {exc}"


def get_user_details(data: Any, /, user_id: str) -> str:
    user = data.user(user_id)
    return json.dumps(user) if user is not None else "Error: user not found"


def think(data: Any, /, thought: str) -> str:
    """A scratchpad: records nothing and returns nothing."""
    return ""


def transfer_to_human_agents(data: Any, /, summary: str) -> str:
    """Hand the user over to a human; the environment ends the conversation."""
    return "Transfer successful"
