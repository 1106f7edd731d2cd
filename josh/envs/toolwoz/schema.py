"""ToolWOZ tool schemas (OpenAI function format) and argument validation (spec: Tool calls and errors).

The parameter names and enums follow ToolWOZ; the descriptions are ours. ``validate`` checks a call in the spec's
order (malformed → unknown tool → unknown argument → invalid value) and returns either the normalised arguments or
a ``Rejection`` naming the error category. It never raises, whatever the arguments hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from josh.envs.toolwoz.normalize import NO_CONSTRAINT, normalize
from josh.types import ErrorCategory

AREAS = ("west", "east", "centre", "south", "north")
PRICES = ("cheap", "moderate", "expensive")
YES_NO = ("yes", "no")


@dataclass(frozen=True)
class Param:
    """One string parameter of a tool; ``enum`` lists its only allowed values when set."""

    description: str
    enum: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ToolSpec:
    """One ToolWOZ API: ``action`` is ``search`` or ``book`` on ``domain``."""

    domain: str
    action: str
    description: str
    params: dict[str, Param] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.action}_{self.domain}"

    def to_openai(self) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        for key, param in self.params.items():
            prop: dict[str, Any] = {"type": "string", "description": param.description}
            if param.enum is not None:
                prop["enum"] = list(param.enum)
            properties[key] = prop
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": properties, "required": []},
            },
        }


_SPECS = (
    ToolSpec(
        "restaurant",
        "search",
        "Look up a Cambridge restaurant. Returns at most one matching venue with its details.",
        {
            "name": Param("Restaurant name, e.g. pizza hut city centre"),
            "food": Param("Cuisine served, e.g. italian or modern european"),
            "pricerange": Param("How expensive the restaurant is", PRICES),
            "area": Param("Part of town, e.g. centre"),
        },
    ),
    ToolSpec(
        "restaurant",
        "book",
        "Reserve a table. Returns a booking reference on success.",
        {
            "name": Param("Restaurant to book, e.g. the river bar steakhouse and grill"),
            "time": Param("Reservation time as HH:MM, e.g. 19:30"),
            "day": Param("Day of the week, e.g. friday"),
            "people": Param("Number of guests, e.g. 4"),
        },
    ),
    ToolSpec(
        "hotel",
        "search",
        "Look up a Cambridge hotel or guesthouse. Returns at most one matching place with its details.",
        {
            "name": Param("Hotel name, e.g. acorn guest house"),
            "area": Param("Part of town", AREAS),
            "parking": Param("Free parking available", YES_NO),
            "pricerange": Param("How expensive the place is", PRICES),
            "stars": Param("Star rating", ("0", "1", "2", "3", "4")),
            "internet": Param("Free wifi available", YES_NO),
            "type": Param("Kind of accommodation", ("hotel", "guesthouse")),
        },
    ),
    ToolSpec(
        "hotel",
        "book",
        "Reserve rooms. Returns a booking reference on success.",
        {
            "name": Param("Hotel to book, e.g. hamilton lodge"),
            "day": Param("Day of the week the stay starts, e.g. monday"),
            "stay": Param("Number of nights, e.g. 3"),
            "people": Param("Number of guests, e.g. 2"),
        },
    ),
    ToolSpec(
        "attraction",
        "search",
        "Look up a Cambridge attraction. Returns at most one matching place with its details.",
        {
            "name": Param("Attraction name, e.g. kings college"),
            "type": Param("Kind of attraction, e.g. museum, college, boat"),
            "area": Param("Part of town", AREAS),
        },
    ),
    ToolSpec("attraction", "book", "Attractions take no bookings; this call always fails."),
    ToolSpec(
        "train",
        "search",
        "Look up a train. Returns at most one matching train with its times and price.",
        {
            "departure": Param("Station the train leaves from, e.g. cambridge"),
            "destination": Param("Station the train goes to, e.g. london kings cross"),
            "day": Param("Day of travel, e.g. tuesday"),
            "leaveAt": Param("Earliest departure time as HH:MM, e.g. 08:45"),
            "arriveBy": Param("Latest arrival time as HH:MM, e.g. 12:30"),
        },
    ),
    ToolSpec(
        "train",
        "book",
        "Buy train tickets. Returns a booking reference on success.",
        {
            "trainID": Param("Train to book, e.g. TR2048"),
            "people": Param("Number of tickets, e.g. 3"),
        },
    ),
)

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in _SPECS}
_ENUMS: dict[str, dict[str, frozenset[str]]] = {
    spec.name: {k: frozenset(map(normalize, p.enum)) for k, p in spec.params.items() if p.enum is not None}
    for spec in _SPECS
}
_ECHO_LIMIT = 60
_CONTAINERS = (list, tuple, dict, set)


def openai_tools() -> list[dict[str, Any]]:
    """Fresh OpenAI-format schemas of every ToolWOZ API."""
    return [spec.to_openai() for spec in _SPECS]


@dataclass(frozen=True)
class Rejection:
    """Why a call was refused, as the agent will read it."""

    category: ErrorCategory
    message: str

    def to_json(self) -> str:
        return json.dumps({"error": self.category.value, "message": self.message})


@dataclass(frozen=True)
class ValidCall:
    """A call that passed validation: its API and its normalised constraining arguments."""

    spec: ToolSpec
    args: dict[str, str]


def _echo(value: Any) -> str:
    """A short printable rendering of a user-supplied value for error messages."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _ECHO_LIMIT else text[:_ECHO_LIMIT] + "..."


def _parse_arguments(arguments: Any) -> dict[str, Any] | None:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def validate(name: Any, arguments: Any) -> ValidCall | Rejection:
    """Check one call against the schemas; the first failing check decides the category."""
    args = _parse_arguments(arguments)
    if not isinstance(name, str) or not name.strip() or args is None:
        return Rejection(ErrorCategory.MALFORMED, "The call must have a tool name and a JSON object of arguments.")
    spec = TOOLS.get(name)
    if spec is None:
        known = ", ".join(TOOLS)
        return Rejection(ErrorCategory.UNKNOWN_TOOL, f"There is no tool named {_echo(name)!r}. Tools: {known}.")
    params = spec.params
    if not params.keys() >= args.keys():
        unknown = next(key for key in args if key not in params)
        allowed = ", ".join(params) or "none"
        return Rejection(
            ErrorCategory.UNKNOWN_ARGUMENT, f"{name} has no argument {_echo(unknown)!r}. Allowed arguments: {allowed}."
        )
    enums = _ENUMS[name]
    normalised: dict[str, str] = {}
    for key, value in args.items():
        if isinstance(value, _CONTAINERS):
            return Rejection(ErrorCategory.INVALID_VALUE, f"{key} must be a single string, not a list or object.")
        text = normalize(value)
        if text in NO_CONSTRAINT:
            continue
        if key in enums and text not in enums[key]:
            options = ", ".join(spec.params[key].enum or ())
            return Rejection(
                ErrorCategory.INVALID_VALUE, f"{key}={_echo(value)!r} is not allowed. Choose one of: {options}."
            )
        normalised[key] = text
    return ValidCall(spec, normalised)
