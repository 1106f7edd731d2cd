"""τ-bench outcome reward pieces: required outputs in the agent's replies, and pass^k over repeated trials."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

from pydantic import BaseModel, Field

from josh.types import Message

SUCCESS_TOLERANCE = 1e-6


class OutcomeReward(BaseModel):
    """The outcome reward of one conversation and why: database check and required-output check."""

    reward: float
    r_actions: bool
    data_hash: str
    gold_hash: str
    outputs: dict[str, bool] = Field(default_factory=dict)

    @property
    def r_outputs(self) -> bool:
        return all(self.outputs.values())


def outputs_found(outputs: Sequence[str], messages: Sequence[Message]) -> dict[str, bool]:
    """For each required string: does its lower-case form occur in some assistant reply (commas removed)?"""
    replies = [m.content.lower().replace(",", "") for m in messages if m.role == "assistant" and m.content]
    return {out: any(out.lower() in reply for reply in replies) for out in outputs}


def pass_hat_k(trials: Sequence[Sequence[float]], k: int) -> float:
    """pass^k: the mean over tasks of C(c, k) / C(n, k), with n trials and c successes (reward 1) per task."""
    if not trials:
        raise ValueError("pass^k needs at least one task")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    total = 0.0
    for index, rewards in enumerate(trials):
        n = len(rewards)
        if n < k:
            raise ValueError(f"task {index} has {n} trials, fewer than k={k}")
        c = sum(1 for r in rewards if abs(r - 1.0) <= SUCCESS_TOLERANCE)
        total += comb(c, k) / comb(n, k)
    return total / len(trials)
