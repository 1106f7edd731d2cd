"""PNG plots of a loop's evaluations (matplotlib, headless): reward and success with bootstrap intervals, error
categories per model, and reward per round.

Each plot notes, beside its PNG (``.NAME.png.sha256``), a digest of what it was drawn from: the models, this
module's code and matplotlib's version. A report written again from the same evaluations (a resumed loop with
nothing new, ``josh report``) keeps the PNG instead of drawing it again (a plot costs a few tenths of a second).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _stamp(path: Path) -> Path:
    return path.with_name(f".{path.name}.sha256")


@cache
def _own_code() -> bytes:
    """This module's source, read once per process (a plot drawn by other code is drawn again)."""
    return Path(__file__).read_bytes()


def _digest(kind: str, models: Sequence[Any], *extra: Any) -> str:
    """What a plot is drawn from: its kind, the models, ``extra``, this module's code and matplotlib's version."""
    data = [kind, matplotlib.__version__, [m.model_dump(mode="json") for m in models], [str(e) for e in extra]]
    text = _own_code() + json.dumps(data, sort_keys=True).encode()
    return hashlib.sha256(text).hexdigest()


def _drawn(path: Path, digest: str) -> bool:
    """``path`` holds the plot of ``digest`` already."""
    stamp = _stamp(path)
    return path.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8") == digest


def _save(fig: Any, path: Path, digest: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _stamp(path).unlink(missing_ok=True)  # a save cut short leaves no stamp, so the plot is drawn again
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    _stamp(path).write_text(digest, encoding="utf-8")
    return path


def _errorbars(intervals: Sequence[Any]) -> np.ndarray:
    return np.array([[iv.mean - iv.low for iv in intervals], [iv.high - iv.mean for iv in intervals]])


def plot_reward(models: Sequence[Any], path: Path) -> Path:
    """Grouped bars of average reward and 100% success per model, with 95% interval error bars."""
    if _drawn(path, digest := _digest("reward", models)):
        return path
    labels = [m.label for m in models]
    x = np.arange(len(models))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(models) + 2), 4))
    for offset, name, attr, color in (
        (-width / 2, "average reward", "average_reward", "#3a6ea5"),
        (width / 2, "100% success", "success_rate", "#e08a2c"),
    ):
        ivs = [getattr(m.summary, attr) for m in models]
        bars = ax.bar(x + offset, [iv.mean for iv in ivs], width, yerr=_errorbars(ivs), capsize=4, label=name,
                      color=color)  # fmt: skip
        ax.bar_label(bars, labels=[f"{iv.mean:.2f}" for iv in ivs], padding=2, fontsize=8)
    ax.set_xticks(x, labels, rotation=15, ha="right")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("score on held-out tasks")
    ax.set_title("Before and after self-training (95% bootstrap intervals)")
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path, digest)


def plot_errors(models: Sequence[Any], path: Path) -> Path:
    """Share of conversations with each error category, per model (says so when no model made an error)."""
    if _drawn(path, digest := _digest("errors", models)):
        return path
    categories = sorted({c for m in models for c in m.summary.error_counts})
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(categories) + 2), 4))
    if not categories:
        ax.text(0.5, 0.5, "no errors in any conversation", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    width = 0.8 / len(models)
    x = np.arange(len(categories))
    for i, m in enumerate(models if categories else []):
        per_conversation = [m.summary.error_counts.get(c, 0) / max(1, m.summary.conversations) for c in categories]
        ax.bar(x - 0.4 + width * (i + 0.5), per_conversation, width, label=m.label)
    if categories:
        ax.set_xticks(x, [c.replace("_", " ") for c in categories], rotation=15, ha="right")
        ax.set_ylabel("errors per conversation")
        ax.legend(fontsize=8)
    ax.set_title("Error categories per model")
    return _save(fig, path, digest)


def plot_rounds(models: Sequence[Any], start: str | None, path: Path) -> Path | None:
    """Average reward (with intervals) against the round, one line per arm from the policy that searched first
    (``start``, at round 0); none when no round trained a model."""
    arms: dict[str, list[Any]] = {}
    for m in models:
        if m.round > 0:
            arms.setdefault(m.arm, []).append(m)
    if not arms:
        return None
    if _drawn(path, digest := _digest("rounds", models, start)):
        return path
    first = [m for m in models if m.label == start]
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (arm, rows) in enumerate(arms.items()):
        rows = first + sorted(rows, key=lambda r: r.round)
        ivs = [r.summary.average_reward for r in rows]
        dodge = 0.04 * (i - (len(arms) - 1) / 2)  # side by side, so overlapping intervals stay readable
        ax.errorbar([r.round + dodge for r in rows], [iv.mean for iv in ivs], yerr=_errorbars(ivs), marker="o",
                    capsize=4, label=arm)  # fmt: skip
    for m in first:
        ax.annotate(m.label, (0, m.summary.average_reward.mean), textcoords="offset points", xytext=(6, -4), fontsize=8)
    ax.set_xticks(sorted({0, *(m.round for rows in arms.values() for m in rows)}))
    ax.set_xlabel("round (0 = the policy that ran the first search)")
    ax.set_ylabel("average reward on held-out tasks")
    ax.set_ylim(0, 1.05)
    ax.set_title("Average reward per round (95% bootstrap intervals)")
    ax.legend(fontsize=8)
    return _save(fig, path, digest)
