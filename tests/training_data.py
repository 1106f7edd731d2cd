"""Small SFT / KTO / DPO rows for the training tests (a ReACT agent and a function-calling agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIND_TOOL = {
    "type": "function",
    "function": {
        "name": "find_restaurant",
        "description": "Search restaurants.",
        "parameters": {
            "type": "object",
            "properties": {"food": {"type": "string"}, "area": {"type": "string"}},
            "required": ["food"],
        },
    },
}


def react_conversation(food: str) -> list[dict[str, Any]]:
    """A ReACT-style transcript: plain-text assistant messages, no tools."""
    return [
        {"role": "system", "content": "You are a booking agent. Think, then act."},
        {"role": "user", "content": f"I want {food} food in the centre."},
        {"role": "assistant", "content": f"THOUGHT: search {food}.\nAPI: find_restaurant(food={food})"},
        {"role": "user", "content": "API RESULT: golden house"},
        {"role": "assistant", "content": "SPEAK: Golden House serves that. Shall I book it?"},
    ]


def tool_conversation(food: str) -> list[dict[str, Any]]:
    """A function-calling transcript: tool_calls, a tool result, and a spoken reply."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "find_restaurant", "arguments": json.dumps({"food": food, "area": "centre"})},
    }
    return [
        {"role": "system", "content": "You are a booking agent."},
        {"role": "user", "content": f"Find me {food} food in the centre please."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"name": "golden house"}'},
        {"role": "assistant", "content": "Golden House is a good match."},
    ]


def sft_rows(n: int) -> list[dict[str, Any]]:
    foods = ["chinese", "italian", "indian"]
    rows = []
    for i in range(n):
        food = foods[i % len(foods)]
        if i % 2:
            rows.append({"messages": tool_conversation(food), "tools": [FIND_TOOL]})
        else:
            rows.append({"messages": react_conversation(food)})
    return rows


def kto_rows(n: int, tools: bool = True) -> list[dict[str, Any]]:
    """Alternating good (the right next turn) and bad (a refusal) rows; ``tools=False`` gives short ReACT rows."""
    rows = []
    for i in range(n):
        food = ["chinese", "italian"][i % 2]
        convo = tool_conversation(food) if tools else react_conversation(food)
        good = i % 2 == 0
        completion = convo[2] if good else {"role": "assistant", "content": "I cannot help with that."}
        rows.append(
            {"prompt": convo[:2], "completion": [completion], "label": good, "tools": [FIND_TOOL] if tools else []}
        )
    return rows


def dpo_rows(n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        convo = react_conversation(["chinese", "italian"][i % 2])
        rejected = {"role": "assistant", "content": "SPEAK: no idea."}
        rows.append({"prompt": convo[:2], "chosen": [convo[2]], "rejected": [rejected]})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
