"""The retail tool registry: each tool's function, schema, and whether it writes or ends the conversation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from josh.envs.retail.state import RetailState
from josh.envs.retail.tools import lookups, writes
from josh.envs.retail.tools.schemas import SCHEMAS
from josh.types import ErrorCategory

WRITE_TOOLS = (
    "cancel_pending_order",
    "modify_pending_order_address",
    "modify_pending_order_payment",
    "modify_pending_order_items",
    "return_delivered_order_items",
    "exchange_delivered_order_items",
    "modify_user_address",
)
TERMINAL_TOOLS = ("transfer_to_human_agents",)


@dataclass(frozen=True)
class RetailTool:
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
            if not _fits(arguments[key], spec):
                kind = "a list of strings" if spec["type"] == "array" else "a string"
                return f"Error: argument '{key}' of {self.name}() must be {kind}", ErrorCategory.INVALID_VALUE
        return None

    def __call__(self, state: RetailState, arguments: dict[str, Any]) -> str:
        return self.fn(state, **arguments)


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    if spec["type"] == "array":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, str)


def _registry() -> dict[str, RetailTool]:
    modules = (lookups, writes)
    tools: dict[str, RetailTool] = {}
    for schema in SCHEMAS:
        name = schema["function"]["name"]
        fn = next(getattr(m, name) for m in modules if hasattr(m, name))
        tools[name] = RetailTool(name=name, fn=fn, schema=schema)
    return tools


TOOLS: dict[str, RetailTool] = _registry()
