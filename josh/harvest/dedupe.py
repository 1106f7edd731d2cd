"""Rows deduplicated per file, the first occurrence kept: a row's identity compares its messages without tool-call
ids (random per sample), and a KTO negative whose prompt and completion are also a positive is dropped."""

from __future__ import annotations

import json
from typing import Any

from josh.core.rows import Row
from josh.harvest.extract_stats import ExtractStats
from josh.types import Message


def _call_key(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def messages_key(messages: list[Message]) -> str:
    """Identity of a message list that ignores tool-call ids."""
    parts = [
        (m.role, m.content or "", [(c.name, _call_key(c.arguments)) for c in m.tool_calls or ()]) for m in messages
    ]
    return json.dumps(parts, ensure_ascii=False)


def row_key(row: Row, *fields: str) -> str:
    """Identity of a row's ``fields`` (each a message list), tool-call ids ignored."""
    return json.dumps([messages_key([Message.from_openai(m) for m in row[f]]) for f in fields], ensure_ascii=False)


def dedupe(rows: list[Row], fields: tuple[str, ...], stats: ExtractStats) -> list[Row]:
    """``rows`` without repeats of ``fields`` and label, the first kept; the dropped counted in ``stats``."""
    seen: set[str] = set()
    out = []
    for row in rows:
        key = f"{row_key(row, *fields)}|{row.get('label')}"
        if key in seen:
            stats.duplicates_dropped += 1
            continue
        seen.add(key)
        out.append(row)
    return out


def resolve_kto(rows: list[Row], stats: ExtractStats) -> list[Row]:
    """Drop a negative whose prompt+completion is also a positive; positives first, then negatives."""
    good = [r for r in rows if r["label"]]
    good_keys = {row_key(r, "prompt", "completion") for r in good}
    bad = []
    for r in rows:
        if r["label"]:
            continue
        if row_key(r, "prompt", "completion") in good_keys:
            stats.kto_conflicts_dropped += 1
        else:
            bad.append(r)
    return good + bad
