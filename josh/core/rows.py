"""The training rows harvest writes and training reads: their formats and each format's columns (TRL's
conversational formats, plus the tree rows of GRPO's prompts), below both so neither imports the other."""

from __future__ import annotations

from typing import Any

Row = dict[str, Any]
"""One training row, as one JSON line of its format's file."""

TRL_FORMATS = ("sft", "kto", "dpo")
FORMATS = (*TRL_FORMATS, "tree")
FIELDS: dict[str, tuple[str, ...]] = {
    "sft": ("messages",),
    "kto": ("prompt", "completion"),
    "dpo": ("prompt", "chosen", "rejected"),
    "tree": ("prompt", "completion"),
}
"""The columns of each row format, as extraction writes them."""
