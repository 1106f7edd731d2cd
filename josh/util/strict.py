"""Strict settings: a config model refuses unknown keys at every depth, and a refusal names the key's full path, the
closest valid key and, when no key is close, every valid key there.

``explain`` turns a pydantic ``ValidationError`` into those lines for any model (a recipe, a component's options), under
the path where the model sits (``setup.agent_options`` for an agent's options in a loop recipe). ``nested_model`` and
``keys_at`` walk a model's fields through ``Optional``, unions, lists and dicts, which is also how the tests find every
nesting level to put an unknown key in.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

Loc = Sequence[str | int]


class StrictModel(BaseModel):
    """A settings model: unknown keys are refused, and so are bad values assigned later. ``suggestions`` maps an
    unknown key that means one of the model's keys (an earlier or another library's name) to that key, which its
    refusal then suggests."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    suggestions: ClassVar[dict[str, str]] = {}


class ConfigError(ValueError):
    """Settings (a recipe file, ``--set`` overrides, a component's options) are invalid; the message says where and
    how to fix it."""


def nested_model(annotation: Any) -> tuple[type[BaseModel], str | None] | None:
    """The model a field of this type holds and the container it sits in: None, 'list' (a location names an index
    before the model's own fields) or 'dict' (a key); None when the field holds no model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return nested_model(args[0])
    if origin in (typing.Union, types.UnionType):
        found = [model for model in map(nested_model, args) if model is not None]
        return found[0] if len(found) == 1 else None
    if origin in (list, tuple, set, frozenset, Sequence) and args:
        inner = nested_model(args[0])
        return (inner[0], "list") if inner else None
    if origin is dict and len(args) == 2:
        inner = nested_model(args[1])
        return (inner[0], "dict") if inner else None
    return None


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model that ``loc`` (all but its last item) points into; None where it leaves the models."""
    parts = list(loc[:-1])
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        inner = nested_model(field.annotation) if field is not None else None
        if inner is None:
            return None
        model, contained = inner
        if contained:
            if not parts:
                return None
            parts.pop(0)
    return model


def keys_at(model: type[BaseModel], loc: Loc) -> list[str] | None:
    """The valid keys of the model that ``loc`` (all but its last item) points into; None where it leaves the models."""
    inner = model_at(model, loc)
    return list(inner.model_fields) if inner is not None else None


def closest(name: str, valid: Sequence[str]) -> str | None:
    """The most similar valid key: by spelling, else one that starts the other (``rank`` → ``r``)."""
    close = difflib.get_close_matches(name, list(valid), n=1)
    if close:
        return close[0]
    prefixed = [k for k in sorted(valid, key=len, reverse=True) if name.startswith(k) or k.startswith(name)]
    return prefixed[0] if prefixed else None


def unknown_key(loc: Loc, valid: Sequence[str], about: str = "", meant: str | None = None) -> str:
    """One refusal: ``unknown key 'a.b.c' (for ...), did you mean 'a.b.x'?`` (``meant``, else the closest valid key),
    or the valid keys when none is close."""
    path = ".".join(map(str, loc))
    suggestion = meant or closest(str(loc[-1]), valid)
    where = f" for {about}" if about else ""
    if suggestion is not None:
        near = ".".join([*map(str, loc[:-1]), suggestion])
        return f"unknown key {path!r}{where}: did you mean {near!r}?"
    listed = ", ".join(valid) if valid else "none (this section takes no keys)"
    return f"unknown key {path!r}{where} (valid here: {listed})"


def explain(error: ValidationError, model: type[BaseModel], prefix: Loc = (), about: str = "") -> list[str]:
    """One line per problem of ``error`` (raised validating ``model`` at ``prefix``): unknown keys with their full
    path and the closest valid key, other problems with their path and pydantic's message. ``about`` names what the
    model configures (e.g. 'the react agent')."""
    lines = []
    for item in error.errors(include_url=False):
        loc = (*prefix, *item["loc"])
        if item["type"] == "extra_forbidden":
            inner = model_at(model, item["loc"])
            valid = list(inner.model_fields) if inner is not None else []
            suggestions = getattr(inner, "suggestions", {})
            near = closest(str(loc[-1]), [*valid, *suggestions])
            meant = suggestions.get(near, near) if near is not None else None
            lines.append(unknown_key(loc, valid, about, meant))
            continue
        where = ".".join(map(str, loc)) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}" + (f" ({about})" if about else ""))
    return lines
