"""The JSON schema of a tool call that protocols' grammars embed to pin outputs to the tools, for constrained
decoding (``Sampling.grammar``; the grammars themselves are the protocols' ``grammar``).

A call is ``{"name": <one tool>, "arguments": <that tool's parameters>}``: the name is one of the tools (or the
``respond`` action), argument keys come from the schema and nothing else (``additionalProperties`` is closed),
enum values are enforced, and strings without a length bound get one so that a value cannot run past the token
budget. The JSON is written compactly with the separators ``json.dumps`` uses, as in the worked examples. What is
left to sampling is the grounding: which values the model picks. The grammars are Lark in llguidance's dialect
(``%json {...}`` embeds a JSON schema); the hf backend runs them with llguidance, vLLM's ``guidance`` structured
output backend accepts the same text.
"""

from __future__ import annotations

import copy
from typing import Any

MAX_VALUE_CHARS = 80
MAX_REPLY_CHARS = 400
_JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def _closed(schema: Any) -> Any:
    """A copy of a parameter schema with every object closed and every free string bounded."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) if isinstance(v, dict | list) else copy.deepcopy(v) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "object" or "properties" in out:
        out.setdefault("type", "object")
        out.setdefault("properties", {})
        out["additionalProperties"] = False
    if kind == "string" and "enum" not in out and "const" not in out:
        out.setdefault("maxLength", MAX_VALUE_CHARS)
    out.pop("description", None)
    return out


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def call_schema(tools: list[dict[str, Any]], *, arguments_key: str = "arguments", respond: str | None = None) -> dict:
    """The JSON schema of one call to any of ``tools`` (and of the speaking action named ``respond``, if any)."""
    options = []
    for tool in tools:
        fn = _function(tool)
        params = _closed(fn.get("parameters") or {"type": "object", "properties": {}})
        options.append(_named(fn["name"], params, arguments_key))
    if respond:
        content = {"type": "string", "minLength": 1, "maxLength": MAX_REPLY_CHARS}
        reply = {"type": "object", "properties": {"content": content}, "required": ["content"]}
        options.append(_named(respond, _closed(reply), arguments_key))
    return {"anyOf": options, "x-guidance": dict(_JSON_STYLE)}


def _named(name: str, params: dict[str, Any], arguments_key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, arguments_key: params},
        "required": ["name", arguments_key],
        "additionalProperties": False,
    }
