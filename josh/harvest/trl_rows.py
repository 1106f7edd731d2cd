"""Messages in TRL's conversational tool-calling format, the shape of every row ``josh extract`` writes.

TRL (``docs/source/dataset_formats.md``, "Tool Calling") and the ``transformers`` chat templates take an assistant
turn as ``{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name", "arguments"}}]}`` with the
arguments as an object, and a tool's result as ``{"role": "tool", "name": ..., "content": ...}``; the offered tools
go in a ``tools`` column as JSON schemas. So here: a turn that only calls tools has no ``content`` key, arguments
are the call's JSON object (the raw text only where the model wrote no valid object: a negative to unlearn), each
tool message names its tool and keeps its ``tool_call_id``. ``datasets`` (4.7+) loads such files as they are
(``List(Json())`` where the shapes differ from row to row), and josh's own trainers read them unchanged
(``josh.training.data`` accepts arguments as objects or text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from josh.types import Message, ToolCall

ROW_FORMAT = "TRL conversational, tool calling"


def trl_call(call: ToolCall) -> dict[str, Any]:
    """One tool call: its id, ``type: function``, its name and arguments (an object, or the raw text)."""
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def trl_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """``messages`` as TRL rows hold them; a tool result is named after the call it answers (earlier in the list)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for m in messages:
        row: dict[str, Any] = {"role": m.role}
        if m.content is not None or not m.tool_calls:
            row["content"] = m.content or ""
        if m.tool_calls:
            row["tool_calls"] = [trl_call(c) for c in m.tool_calls]
            names.update((c.id, c.name) for c in m.tool_calls)
        if m.role == "tool" and m.tool_call_id in names:
            row["name"] = names[m.tool_call_id]
        if m.tool_call_id is not None:
            row["tool_call_id"] = m.tool_call_id
        out.append(row)
    return out


def arguments_text(arguments: dict[str, Any] | str) -> str:
    """A call's arguments as the text the model writes (for token counts)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
