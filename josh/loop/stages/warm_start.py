"""The warm-start data stages: scripted demonstrations rewritten in the prompted agent's own format (``sft.jsonl``,
written by ``josh.harvest.warmstart``), or rows of a file made elsewhere (``RowsStage``: the paper's
imported rollouts, ``josh data import-paper``)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from josh.agents import agent_prompt
from josh.agents.prompted import AgentPrompt
from josh.harvest.warmstart import WarmStartConfig, warm_start
from josh.loop.stages.base import Stage, StageContext
from josh.loop.stages.manifest import Input
from josh.util.atomic import write_atomic
from josh.util.jsonl import bad_line
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
        unused = {
            "epochs",
            "rows",
            "limit",
            "kto_rows",
            "kto_limit",
            "rows_seed",
            "searches",
            "evaluate",
        }  # the loop's rows options (josh.loop.recipe)
        rows = self.config.model_dump(
            mode="json", exclude=unused | ({"agent"} if self.config.agent == "oracle" else set())
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


def system_prompt(row: dict[str, Any]) -> str | None:
    """The system prompt a TRL conversational row opens with (SFT ``messages`` or KTO/DPO ``prompt``), if any."""
    messages = row.get("messages") or row.get("prompt") or []
    first = messages[0] if isinstance(messages, list) and messages else None
    return first.get("content") if isinstance(first, dict) and first.get("role") == "system" else None


class RowsStage(Stage):
    """``limit`` rows of a rows file made elsewhere (the first ones, or with ``seed`` a random draw kept in file
    order), copied into the stage folder as ``file_name``, so the run keeps the exact rows it trained on; a changed
    file reruns it. Rows whose system prompt is not the one the
    recipe's agent shows its model on the env are counted and reported: such rows teach another prompt."""

    def __init__(
        self,
        ctx: StageContext,
        name: str,
        folder: Path,
        source: Path,
        limit: int | None,
        file_name: str,
        seed: int | None = None,
    ) -> None:
        super().__init__(ctx, name, folder)
        self.source, self.limit, self.seed = source, limit, seed
        self.rows = folder / file_name

    def settings(self) -> dict[str, Any]:
        return {"rows_from": self.source.name, "limit": self.limit, "seed": self.seed}

    def inputs(self) -> dict[str, Input]:
        return {"rows": self.source}

    def outputs(self) -> list[Path]:
        return [self.rows]

    def run(self) -> None:
        if not self.source.is_file():
            raise ValueError(f"{self.source}: no such rows file (josh data import-paper --out DIR writes sft.jsonl)")
        lines = _json_lines(self.source)
        if self.limit is not None and self.limit < len(lines):
            keep = (
                sorted(random.Random(self.seed).sample(range(len(lines)), self.limit))
                if self.seed is not None
                else range(self.limit)
            )
            lines = [lines[i] for i in keep]
        if not lines:
            raise ValueError(f"{self.source} holds no rows")
        task = next(iter(self.ctx.env.tasks(self.ctx.recipe.rollout.split)), None)
        expected = prompt_of(self.ctx).frame(task).system if task is not None else None
        other = sum(system_prompt(json.loads(line)) != expected for line in lines)
        write_atomic(self.rows, "".join(line if line.endswith("\n") else line + "\n" for line in lines))
        self.ctx.log(f"  {len(lines)} rows from {self.source}")
        if other:
            self.ctx.log(f"  ! {other} of {len(lines)} rows open with another system prompt than the agent's")


def _json_lines(path: Path) -> list[str]:
    """The non-empty lines of a rows file as written, each checked to be JSON (a bad one names its file and line, or
    is skipped under ``--skip-bad-lines``)."""
    lines = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError as exc:
                bad_line(path, number, f"is not valid JSON ({exc})")
                continue
            lines.append(line)
    return lines
