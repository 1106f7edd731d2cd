"""Agent prompt material: the protocol templates and worked examples shipped as package data, and a compact
one-line-per-tool rendering of JSON tool schemas (short prompts are what small models can follow)."""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
from string import Template
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

PROMPTS = "josh.agents.prompts"


class Example(BaseModel):
    """One tiny worked exchange: the customer asks, the agent calls a tool, sees the result and replies."""

    model_config = ConfigDict(extra="forbid")

    user: str
    thought: str = ""
    call: dict[str, Any]
    result: str
    reply: str

    @property
    def name(self) -> str:
        return str(self.call.get("name", ""))

    @property
    def arguments(self) -> dict[str, Any]:
        return dict(self.call.get("arguments") or {})


def _resource(path: str) -> str:
    return importlib.resources.files(PROMPTS).joinpath(path).read_text(encoding="utf-8")


@functools.cache
def template(protocol: str) -> Template:
    """The system-prompt template of a protocol (``react``, ``act``, ``function_calling``)."""
    return Template(_resource(f"{protocol}.txt"))


@functools.cache
def examples(env_name: str) -> tuple[Example, ...]:
    """The worked examples for an environment, or the generic ones when it has none of its own."""
    source = importlib.resources.files(PROMPTS).joinpath(f"examples/{env_name}.yaml")
    text = source.read_text(encoding="utf-8") if source.is_file() else _resource("examples/generic.yaml")
    return tuple(Example.model_validate(item) for item in yaml.safe_load(text))


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def compact_tool(tool: dict[str, Any]) -> str:
    """``name(arg, arg*: a|b|c) - description``; ``*`` marks a required argument."""
    fn = _function(tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required") or ())
    args = []
    for key, spec in (params.get("properties") or {}).items():
        label = key + ("*" if key in required else "")
        enum = spec.get("enum") if isinstance(spec, dict) else None
        args.append(f"{label}: {'|'.join(str(v) for v in enum)}" if enum else label)
    description = (fn.get("description") or "").strip().splitlines()
    tail = f" - {description[0]}" if description else ""
    return f"{fn.get('name', '?')}({', '.join(args)}){tail}"


def brief_tool(tool: dict[str, Any]) -> str:
    """``name(arg, arg)``: the signature alone, for decoders whose grammar supplies allowed values."""
    fn = _function(tool)
    keys = ((fn.get("parameters") or {}).get("properties") or {}).keys()
    return f"{fn.get('name', '?')}({', '.join(keys)})"


ToolListing = Literal["full", "brief", "none"]


def tool_listing(tools: list[dict[str, Any]], mode: ToolListing = "full") -> str:
    """The prompt's tool section: ``full`` (``compact_tool`` lines), ``brief`` (``brief_tool`` lines) or ``none``."""
    if mode == "none" or not tools:
        return ""
    if mode == "brief":
        return "Tools (name: arguments):\n" + "\n".join(brief_tool(t) for t in tools)
    return "Tools (name: arguments; a|b lists the allowed values):\n" + "\n".join(compact_tool(t) for t in tools)


def render(
    prompt: Template, *, tools: list[dict[str, Any]], domain: str, example_text: str, listing: ToolListing = "full"
) -> str:
    """Fill a protocol's prompt template; blank runs left by empty sections collapse to one blank line."""
    text = prompt.substitute(tools=tool_listing(tools, listing), domain=domain.strip(), examples=example_text.strip())
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def dump(arguments: dict[str, Any]) -> str:
    """Compact JSON the way the examples show calls."""
    return json.dumps(arguments, ensure_ascii=False)
