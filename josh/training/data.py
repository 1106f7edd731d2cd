"""Load SFT / KTO / DPO JSONL files into TRL-ready ``datasets.Dataset`` objects.

Rows come from the extraction stage in OpenAI chat format. Arrow needs one schema per column, and tool schemas or
call arguments differ from row to row, so the loader normalises every message to the same five keys, keeps each
call's arguments as a canonical JSON string (rendered exactly like a dict through the template's ``tojson``) and
the tool list as one JSON string per row (TRL decodes it right before applying the chat template).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from josh.core.rows import FIELDS as COLUMNS
from josh.training.recipe import Method
from josh.util.jsonl import CorruptLineError, bad_line, written_lines

ROLES = {"system", "user", "assistant", "tool"}


class DatasetError(ValueError):
    """A training file is missing, empty, or has a row that cannot be trained on."""


class BadRowError(DatasetError, CorruptLineError):
    """A line of a training file that is not JSON or not a row of its method."""


def _canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
        return json.dumps(parsed, ensure_ascii=False) if isinstance(parsed, dict) else arguments
    raise TypeError(f"tool call arguments must be a JSON string or an object, got {type(arguments).__name__}")


def _tool_call(call: Any) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise TypeError("each tool call must be an object")
    fn = call.get("function", call)
    if not isinstance(fn, dict) or not fn.get("name"):
        raise TypeError("a tool call has no function name")
    return {
        "id": str(call.get("id") or ""),
        "type": "function",
        "function": {"name": str(fn["name"]), "arguments": _canonical_arguments(fn.get("arguments", {}))},
    }


def normalise_message(message: Any) -> dict[str, Any]:
    """One OpenAI message with the same keys and types in every row (arrow-friendly)."""
    if not isinstance(message, dict):
        raise TypeError(f"a message must be an object, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise TypeError(f"unknown message role {role!r} (expected one of {sorted(ROLES)})")
    calls = message.get("tool_calls") or None
    if calls is not None and role != "assistant":
        raise TypeError(f"only assistant messages may carry tool_calls, not {role!r}")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content must be text, got {type(content).__name__}")
    if content is None and role != "assistant":
        raise TypeError(f"a {role} message has no content")
    if role == "assistant" and not content and not calls:
        raise TypeError("an assistant message has neither content nor tool_calls")
    return {
        "role": role,
        "content": content if content is not None else "",
        "tool_calls": [_tool_call(c) for c in calls] if calls else None,
        "tool_call_id": message.get("tool_call_id"),
    }


def _messages(value: Any, column: str) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise TypeError(f"{column!r} must be a non-empty list of messages")
    return [normalise_message(m) for m in value]


def normalise_row(row: Any, method: Method) -> dict[str, Any]:
    """Validate and normalise one JSONL row for ``method``; raises ``TypeError`` with the reason."""
    if not isinstance(row, dict):
        raise TypeError("a row must be a JSON object")
    if method not in COLUMNS:
        raise TypeError(f"the {method} method does not train on a rows file")
    missing = [c for c in COLUMNS[method] if c not in row]
    if method == "kto" and "label" not in row:
        missing.append("label")
    if method == "tree" and "advantage" not in row:
        missing.append("advantage")
    if missing:
        raise TypeError(f"missing {', '.join(missing)} (a {method} row has {', '.join(COLUMNS[method])})")
    out = {c: _messages(row[c], c) for c in COLUMNS[method]}
    for column in ("completion", "chosen", "rejected"):
        if column in out and out[column][0]["role"] != "assistant":
            raise TypeError(f"{column!r} must start with an assistant message")
    if method == "sft" and not any(m["role"] == "assistant" for m in out["messages"]):
        raise TypeError("the conversation has no assistant message to learn from")
    if method == "kto":
        if not isinstance(row["label"], bool):
            raise TypeError(f"'label' must be true or false, got {row['label']!r}")
        out["label"] = row["label"]
    if method == "tree":
        advantage = row["advantage"]
        if isinstance(advantage, bool) or not isinstance(advantage, int | float) or not math.isfinite(advantage):
            raise TypeError(f"'advantage' must be a finite number, got {advantage!r}")
        out["advantage"] = float(advantage)
    tools = row.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise TypeError("'tools' must be a list of function schemas")
    out["tools"] = json.dumps(tools, ensure_ascii=False) if tools else None
    return out


def read_rows(path: str | Path, method: Method) -> list[dict[str, Any]]:
    """Read and normalise every row of a JSONL file; the first bad row stops with its line number (inside
    ``josh.util.jsonl.skipping_bad_lines``, ``--skip-bad-lines``: it is skipped and reported)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"training data not found: {path} (josh extract writes no file for a format it has no rows of: see its "
            "extract_stats.json)"
        )
    rows = []
    for number, line in written_lines(path):
        try:
            rows.append(normalise_row(json.loads(line), method))
        except (json.JSONDecodeError, TypeError) as exc:
            bad_line(path, number, f"is not a valid {method} row: {exc}", error=BadRowError)
    if not rows:
        raise DatasetError(f"{path} has no rows: nothing to train on")
    if method == "kto":
        check_kto_labels(rows, path)
    return rows


def check_kto_labels(rows: list[dict[str, Any]], path: str | Path = "the dataset") -> tuple[int, int]:
    """(desirable, undesirable) counts; KTO needs both kinds."""
    good = sum(1 for r in rows if r["label"])
    bad = len(rows) - good
    if not good or not bad:
        kind = "desirable (label: true)" if not good else "undesirable (label: false)"
        raise DatasetError(f"{path} has no {kind} rows; KTO needs both kinds ({good} desirable, {bad} undesirable)")
    return good, bad


def drop_overlong(
    rows: list[dict[str, Any]], length: Callable[[dict[str, Any]], int], max_length: int, path: str | Path
) -> tuple[list[dict[str, Any]], int]:
    """Keep rows that fit ``max_length`` tokens whole (never train on a silently truncated conversation)."""
    kept = [r for r in rows if length(r) <= max_length]
    if not kept:
        raise DatasetError(f"every row of {path} is longer than max_length={max_length} tokens; raise max_length")
    return kept, len(rows) - len(kept)


def to_dataset(rows: list[dict[str, Any]]) -> Any:
    """An arrow-backed ``datasets.Dataset`` of normalised rows."""
    from datasets import Dataset  # optional: the train extra

    return Dataset.from_list(rows)


def rendered_length(tokenizer: Any, row: dict[str, Any], method: Method) -> int:
    """Tokens of the longest sequence the trainer will build from ``row`` (what ``max_length`` must hold)."""
    tools = json.loads(row["tools"]) if row.get("tools") else None
    if method == "sft":
        sequences = [row["messages"]]
    elif method in ("kto", "tree"):
        sequences = [row["prompt"] + row["completion"]]
    else:
        sequences = [row["prompt"] + row["chosen"], row["prompt"] + row["rejected"]]
    return max(
        len(tokenizer.apply_chat_template(s, tools=tools, tokenize=True, return_dict=True)["input_ids"])
        for s in sequences
    )
