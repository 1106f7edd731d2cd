"""What each evaluated model of a loop cost in LLM calls and tokens, so arms are compared at equal cost.

A JOSH arm's model of round R (JOSH-SFT, JOSH-KTO, JOSH-SFT+KTO, JOSH-tree, control-random, an arm of your own) was
trained on the searches of rounds 1..R: its cost is their LLM calls and tokens (agent and user together, from each
round's ``rollouts/stats.json``). An arm that rolls out on its own (GRPO) records its training folder per round in
``RoundRecord.own_rollouts``; its model of round R cost the LLM calls of those rollouts in rounds 1..R (each
folder's ``metrics.json``). Models of round 0 (the base model, the scripted warm start, control-retrain) cost no LLM
call. Evaluation calls are not counted here; the model table has them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from josh.core.llm import Spent
from josh.loop.result import LoopResult
from josh.util.layout import METRICS, ROLLOUT_STATS


class ArmCost(Spent):
    """LLM calls and tokens spent producing one evaluated model's training data."""

    label: str
    arm: str
    round: int
    spent_on: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _read(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _usage(data: dict[str, Any]) -> tuple[int, int, int]:
    return int(data.get("llm_calls") or 0), int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0)


def arm_costs(result: LoopResult) -> list[ArmCost]:
    """One entry per evaluated model (see the module docstring)."""
    search = {rec.round: _usage(_read(rec.rollouts / ROLLOUT_STATS)) for rec in result.rounds}
    own: dict[str, dict[int, tuple[int, int, int]]] = {}
    for rec in result.rounds:
        for arm, folder in rec.own_rollouts.items():
            own.setdefault(arm, {})[rec.round] = _usage(_read(folder / METRICS).get("rollouts") or {})
    out = []
    for item in result.evaluated:
        if item.round == 0:
            out.append(ArmCost(label=item.label, arm=item.arm, round=0, spent_on="-"))
            continue
        per_round, spent_on = (own[item.arm], f"{item.arm} rollouts") if item.arm in own else (search, "JOSH searches")
        calls, prompt, completion = (sum(v[i] for r, v in per_round.items() if r <= item.round) for i in range(3))
        out.append(
            ArmCost(
                label=item.label,
                arm=item.arm,
                round=item.round,
                spent_on=f"{spent_on} 1..{item.round}",
                llm_calls=calls,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )  # fmt: skip
        )
    return out
