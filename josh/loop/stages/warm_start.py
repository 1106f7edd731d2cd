"""The warm-start data stage: scripted demonstrations rewritten in the prompted agent's own format (``sft.jsonl``,
written by ``josh.harvest.warmstart``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.agents import agent_prompt
from josh.agents.prompted import AgentPrompt
from josh.harvest.warmstart import WarmStartConfig, warm_start
from josh.loop.stages.base import Stage, StageContext
from josh.util.layout import WARMSTART_ROWS as ROWS_FILE


def prompt_of(ctx: StageContext) -> AgentPrompt:
    """What the recipe's prompted agent shows its model (system prompt, preamble, tools), without a model."""
    setup = ctx.recipe.setup
    return agent_prompt(setup.agent, ctx.env, **setup.agent_options)


class WarmStartStage(Stage):
    """Demonstrations from the recipe's ``warm_start`` settings, in ``round-0/warmstart/data``."""

    def __init__(self, ctx: StageContext, config: WarmStartConfig) -> None:
        super().__init__(ctx, "warm-start data", ctx.run_dir / "round-0" / "warmstart" / "data")
        self.config = config
        self.rows = self.folder / ROWS_FILE  # the SFT rows

    def settings(self) -> dict[str, Any]:
        # training epochs do not change the rows; the default agent is left out so older runs keep their digest
        rows = self.config.model_dump(
            mode="json", exclude={"epochs", *(["agent"] if self.config.agent == "oracle" else [])}
        )
        return {"warm_start": rows, "setup": self.ctx.setup_settings()}

    def outputs(self) -> list[Path]:
        return [self.rows]

    def run(self) -> None:
        train = self.ctx.env.tasks(self.ctx.recipe.rollout.split)
        stats = warm_start(self.ctx.env, train, prompt_of(self.ctx), self.folder, self.config)
        self.ctx.log(f"  {stats.rows} demonstrations from {stats.conversations} scripted conversations")
        if stats.rows == 0:
            raise ValueError("the warm start produced no demonstrations; check warm_start.tasks and the user")
