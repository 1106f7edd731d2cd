"""τ-bench outcome reward pieces: required outputs in the agent's replies (pass^k is ``josh.eval.metrics``)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from josh.types import Message


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
