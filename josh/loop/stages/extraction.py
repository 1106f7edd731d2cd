"""The extraction stage: a round's trees turned into SFT / KTO / DPO rows (``josh.harvest.extract``), or, for the
no-selection control, one random branch per tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from josh.agents import AGENTS, protocols
from josh.eval.judge.reply import reply_judge
from josh.eval.judge.runner import policy_of
from josh.harvest.control import extract_random
from josh.harvest.extract import extract, hf_token_counter
from josh.harvest.reframe import Reframe
from josh.loop.stages.base import Stage, StageContext
from josh.loop.stages.manifest import Input
from josh.loop.stages.warm_start import prompt_of
from josh.util.layout import EXTRACT_STATS as STATS_FILE
from josh.util.layout import rows_file


class ExtractStage(Stage):
    """Rows of round ``round_`` from the trees in ``trees``; with ``control_seed``, the control-random rows (at most
    ``control_rows`` of them)."""

    def __init__(
        self,
        ctx: StageContext,
        round_: int,
        trees: Path,
        *,
        control_seed: int | None = None,
        control_rows: int | None = None,
    ) -> None:
        control = control_seed is not None
        name = f"round {round_} {'control-random data' if control else 'extract'}"
        super().__init__(ctx, name, ctx.run_dir / f"round-{round_}" / ("control-random/data" if control else "extract"))
        self.trees, self.control_seed, self.control_rows = trees, control_seed, control_rows
        self.sft, self.kto, self.stats = (
            self.folder / rows_file("sft"),
            self.folder / rows_file("kto"),
            self.folder / STATS_FILE,
        )

    def settings(self) -> dict[str, Any]:
        config: dict[str, Any] = {"extract": self.ctx.recipe.extract.model_dump(mode="json")}
        config["agent"] = self.ctx.recipe.setup.agent
        if self.control_seed is not None:
            config["random_branch_seed"] = self.control_seed
        if self.control_rows is not None:  # only when set, so earlier runs' manifests still match
            config["random_rows_limit"] = self.control_rows
        return config

    def inputs(self) -> dict[str, Input]:
        return {"trees": self.trees}

    def outputs(self) -> list[Path]:
        return [self.sft, self.kto, self.folder / rows_file("dpo"), self.stats]

    def done(self) -> bool:
        return self.stats.is_file()  # written after the rows; a format with no rows has no file

    def sft_rows(self) -> int:
        """Non-empty lines of ``sft.jsonl`` (0 when it is missing)."""
        return self.ctx.rows(self.sft)

    def harvest(self) -> str:
        """'no usable tree at extract.min_reward X (K of N trees rewarded)', from the extraction's statistics."""
        stats = json.loads(self.stats.read_text(encoding="utf-8"))
        return (
            f"no usable tree at extract.min_reward {self.ctx.recipe.extract.min_reward} ({stats.get('rewarded', 0)} "
            f"of {stats.get('trees', 0)} trees rewarded)"
        )

    def run(self) -> None:
        spec, setup = self.ctx.recipe.extract, self.ctx.recipe.setup
        count, counter = None, "whitespace"
        if setup.backend in ("hf", "vllm"):  # the policy's own tokenizer counts the harvested tokens
            count, counter = hf_token_counter(setup.model), setup.model
        if self.control_seed is not None:
            seed, limit = self.control_seed, self.control_rows
            stats = extract_random(
                self.trees, self.folder, spec, seed, count_tokens=count, counter_name=counter, limit=limit,
                reframe=policy_frame(self.ctx),
            )  # fmt: skip
            matched = f", a random {stats.sft} of {stats.random_pool} to match JOSH's rows" if stats.random_pool else ""
            self.ctx.log(f"  {stats.sft} random branches from {stats.trees} trees ({stats.trimmed} trimmed{matched})")
            return
        judge = (
            reply_judge(policy_of(self.ctx.env), spec.judge.uses_grammar, spec.judge.max_tokens) if spec.judge else None
        )
        stats = extract(
            self.trees, self.folder, spec, count_tokens=count, counter_name=counter, judge=judge,
            reframe=policy_frame(self.ctx),
        )  # fmt: skip
        self.ctx.log(
            f"  {stats.accepted}/{stats.trees} trees used ({stats.rewarded} rewarded, {stats.trimmed} trimmed): "
            f"{stats.sft} SFT, {stats.kto_desirable} good + {stats.kto_undesirable} bad KTO rows"
        )
        if stats.gate is not None:
            g = stats.gate
            self.ctx.log(
                f"  judge gate: {g.replies} replies ({g.cached} cached, {g.failed} failed), {g.removed} turns "
                f"removed ({g.to_kto} to KTO, {g.cut} later turns cut from SFT)"
            )


def policy_frame(ctx: StageContext) -> Reframe | None:
    """The frame of the prompted policy agent the loop trains and evaluates, put on every tree it extracts
    (``None`` for a scripted policy: its trees' frames are what it sees)."""
    if AGENTS.get(ctx.recipe.setup.agent).name not in {p.name for p in protocols()}:
        return None
    return Reframe(prompt_of(ctx), ctx.env, [ctx.recipe.rollout.split, *ctx.env.splits])


class TreeExtractStage(Stage):
    """Round ``round_``'s tree-advantage rows (``tree.jsonl``): every sibling turn of the trees in ``trees``."""

    def __init__(self, ctx: StageContext, round_: int, trees: Path) -> None:
        super().__init__(ctx, f"round {round_} extract-tree", ctx.run_dir / f"round-{round_}" / "extract-tree")
        self.trees, self.rows, self.stats = trees, self.folder / rows_file("tree"), self.folder / STATS_FILE

    def settings(self) -> dict[str, Any]:
        return {"advantages": self.ctx.recipe.advantages.model_dump(mode="json"), "agent": self.ctx.recipe.setup.agent}

    def inputs(self) -> dict[str, Input]:
        return {"trees": self.trees}

    def outputs(self) -> list[Path]:
        return [self.rows, self.stats]

    def done(self) -> bool:
        return self.stats.is_file()  # written after the rows; a format with no rows has no file

    def row_count(self) -> int:
        """Non-empty lines of ``tree.jsonl`` (0 when it is missing)."""
        return self.ctx.rows(self.rows)

    def run(self) -> None:
        stats = extract(
            self.trees, self.folder, formats=("tree",), advantages=self.ctx.recipe.advantages,
            reframe=policy_frame(self.ctx),
        )  # fmt: skip
        self.ctx.log(
            f"  {stats.tree_rows} sibling turns from {stats.tree_groups - stats.tree_zero_groups} groups "
            f"({stats.tree_zero_groups} of {stats.tree_groups} groups had equal rewards and were skipped)"
        )
