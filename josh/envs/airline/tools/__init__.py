"""The airline tool registry: each tool's function and schema, whether it writes or ends the conversation, and
the argument check that runs before any tool (so a call with a wrong type never reaches the database)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from josh.envs.airline.tools import lookups, writes
from josh.envs.airline.tools.schemas import SCHEMAS
from josh.types import ErrorCategory

WRITE_TOOLS = (
    "book_reservation",
    "cancel_reservation",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
    "send_certificate",
)
TERMINAL_TOOLS = ("transfer_to_human_agents",)
_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "array": "a list",
    "object": "an object",
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind in ("integer", "number"):
        allowed = int if kind == "integer" else (int, float)
        return isinstance(value, allowed) and not isinstance(value, bool)
    return isinstance(value, list if kind == "array" else dict)


def value_problem(value: Any, spec: dict[str, Any], where: str) -> str | None:
    """What is wrong with ``value`` under the JSON schema ``spec`` (``where`` names it), or ``None``.

    Nested objects must hold their required keys with the right types; keys they do not declare are kept, as
    τ-bench keeps them."""
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
class AirlineTool:
    name: str
    fn: Callable[..., str]
    schema: dict[str, Any]

    @property
    def writes(self) -> bool:
        return self.name in WRITE_TOOLS

    @property
    def terminal(self) -> bool:
        return self.name in TERMINAL_TOOLS

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


def _registry() -> dict[str, AirlineTool]:
    modules = (lookups, writes)
    tools: dict[str, AirlineTool] = {}
    for schema in SCHEMAS:
        name = schema["function"]["name"]
        fn = next(getattr(m, name) for m in modules if hasattr(m, name))
        tools[name] = AirlineTool(name=name, fn=fn, schema=schema)
    return tools


TOOLS: dict[str, AirlineTool] = _registry()
