"""What ``josh extract`` read and wrote: ``extract_stats.json`` (its own module so the dataset card reads it too)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from josh.harvest.judge_gate import GateStats


class ExtractStats(BaseModel):
    """What ``extract`` read and wrote (``extract_stats.json`` in the output folder)."""

    trees: int = 0
    unreadable: int = 0
    llm_failed: int = Field(0, description="trees whose LLM failed: never harvested (rerun the rollout to redo them)")
    unrenderable: int = Field(0, description="trees whose turns the trained agent's protocol cannot write (--agent)")
    rewarded: int = 0
    accepted: int = 0
    trimmed: int = 0
    below_reward: int = 0
    with_errors: int = 0
    failed_tasks: int = 0
    sft: int = 0
    kto_desirable: int = 0
    kto_undesirable: int = 0
    kto_desirable_fraction: float = 0.0
    kto_conflicts_dropped: int = 0
    duplicates_dropped: int = 0
    dpo: int = 0
    tree_groups: int = 0
    tree_zero_groups: int = 0
    tree_rows: int = 0
    random_pool: int | None = None
    random_rewarded: int | None = Field(None, description="kept random branches that met at least one goal")
    tokens: dict[str, int] = Field(default_factory=dict)
    token_counter: str = "whitespace"
    gate: GateStats | None = Field(None, description="what the judge gate did (extract.judge)")
