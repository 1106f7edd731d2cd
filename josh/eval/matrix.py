"""The agent x user-simulator matrix: every agent evaluated against every user simulator on the same tasks, to see
how much a reward depends on the simulator and whether two agents' order does.

Each cell is an ordinary evaluation (``evaluate``) in ``OUT/cells/<agent>__<user>/``, so a killed matrix resumes
cell by cell and conversation by conversation. ``OUT/matrix.json`` and ``OUT/matrix.md`` hold the reward table with
95% intervals, each agent's spread across simulators, and the agent pairs whose ranking flips between two
simulators (with the paired per-task differences that show it).

A component is written ``KIND[:BACKEND[:MODEL]]``: ``oracle``, ``agenda``, ``react:hf:checkpoints/sft``,
``goal:openai:gpt-4o``. Without a backend and model, an LLM component uses the matrix's ``backend`` and ``model``;
components with the same backend and model share one loaded LLM.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.table import Table

from josh.core.agent import Agent
from josh.core.llm import aclose_all
from josh.core.user import UserSimulator
from josh.eval.evaluate import evaluate, load_finished
from josh.eval.metrics import Interval, PairedDifference, Summary, paired_difference
from josh.eval.summary import fmt_interval
from josh.llm.health import require_complete, stop_if_failing
from josh.run.components import ComponentOptions, SharedComponents, build_shared
from josh.util.atomic import write_atomic
from josh.util.layout import MATRIX_CONFIG as CONFIG_FILE
from josh.util.layout import MATRIX_JSON, MATRIX_MD


class Spec(BaseModel):
    """One agent or user simulator of the matrix, as written on the command line."""

    model_config = ConfigDict(frozen=True)

    text: str
    kind: str
    backend: str | None = None
    model: str | None = None

    @classmethod
    def parse(cls, text: str) -> Spec:
        parts = text.strip().split(":", 2)
        if not parts[0] or any(not p for p in parts[1:]):
            raise ValueError(f"bad component {text!r}: write KIND, KIND:BACKEND or KIND:BACKEND:MODEL")
        return cls(
            text=text.strip(),
            kind=parts[0],
            backend=parts[1] if len(parts) > 1 else None,
            model=parts[2] if len(parts) > 2 else None,
        )

    @property
    def folder(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.text).strip("_")


class MatrixConfig(BaseModel):
    """What a matrix evaluates; the first four fields may not change between runs into the same folder."""

    model_config = ConfigDict(extra="forbid")

    env: str = "toolwoz"
    data: str = "mini"
    split: str = "test"
    env_options: dict[str, Any] = Field(default_factory=dict)
    agents: list[str] = Field(min_length=1)
    users: list[str] = Field(min_length=1)
    backend: str = "hf"
    model: str | None = "smollm2"
    llm_options: dict[str, Any] = Field(default_factory=dict)
    limit: int | None = Field(None, ge=1)
    trials: int = Field(1, ge=1)
    max_turns: int = Field(15, ge=1)
    concurrency: int = Field(16, ge=1)


class Cell(BaseModel):
    """One agent against one user simulator."""

    agent: str
    user: str
    folder: str
    average_reward: Interval
    success_rate: Interval
    conversations: int


class Spread(BaseModel):
    """How much one agent's average reward moves across the simulators."""

    agent: str
    low: float
    high: float
    worst_user: str
    best_user: str

    @property
    def width(self) -> float:
        return self.high - self.low


class Flip(BaseModel):
    """Agent ``a`` beats ``b`` under simulator ``u`` but loses under ``v`` (paired per-task differences a - b)."""

    a: str
    b: str
    u: str
    v: str
    under_u: PairedDifference
    under_v: PairedDifference

    @property
    def clear(self) -> bool:
        """Both differences' 95% intervals exclude zero."""
        return self.under_u.difference.low > 0 and self.under_v.difference.high < 0


class MatrixResult(BaseModel):
    config: MatrixConfig
    cells: list[Cell]
    spreads: list[Spread]
    flips: list[Flip]

    def cell(self, agent: str, user: str) -> Cell:
        return next(c for c in self.cells if c.agent == agent and c.user == user)


def _cells(config: MatrixConfig, agents: list[Spec], users: list[Spec]) -> dict[tuple[str, str], ComponentOptions]:
    """Each (agent, user) cell as the run options every josh run is built from (``josh.run.components``): a
    component without its own backend and model takes the matrix's."""
    base = ComponentOptions(
        env=config.env, data=config.data, env_options=config.env_options, split=config.split, limit=config.limit,
        backend=config.backend, model=config.model, llm_options=config.llm_options,
    )  # fmt: skip
    return {
        (a.text, u.text): base.model_copy(
            update={
                "agent": a.kind,
                "backend": a.backend or config.backend,
                "model": a.model or config.model,
                "user": u.kind,
                "user_backend": u.backend or config.backend,
                "user_model": u.model or config.model,
            }  # fmt: skip
        )
        for a in agents
        for u in users
    }


def build_matrix(
    config: MatrixConfig, agents: list[Spec], users: list[Spec]
) -> tuple[SharedComponents, dict[str, Agent], dict[str, UserSimulator]]:
    """The environment, its tasks and LLMs, and every agent and user simulator of the matrix by its text, built the
    way every josh run builds them (``josh.run.components``: every name, option and backend setting checked and each
    HTTP endpoint asked before anything loads; one LLM per backend and model; users get the environment's tools)."""
    cells = _cells(config, agents, users)
    shared = build_shared(list(cells.values()))
    built_agents = {a.text: shared.agent(cells[a.text, users[0].text]) for a in agents}
    built_users = {u.text: shared.user(cells[agents[0].text, u.text]) for u in users}
    return shared, built_agents, built_users


def _check_folder(out: Path, config: MatrixConfig) -> None:
    """Refuse to mix two matrices in one folder: env, data and split must match the first run's."""
    path = out / CONFIG_FILE
    if path.is_file():
        before = json.loads(path.read_text())
        changed = [k for k in ("env", "data", "split") if before.get(k) != getattr(config, k)]
        if changed:
            was = ", ".join(f"{k}={before.get(k)!r}" for k in changed)
            raise ValueError(f"{out} holds a matrix over {was}; use another --out for a different {'/'.join(changed)}")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, config.model_dump_json(indent=2) + "\n")


def _specs(texts: list[str], what: str) -> list[Spec]:
    specs = [Spec.parse(t) for t in texts]
    folders = [s.folder for s in specs]
    if len(set(folders)) != len(folders):
        raise ValueError(
            f"two {what}s share the name {next(f for f in folders if folders.count(f) > 1)!r}; list each once"
        )
    return specs


async def run_matrix(
    config: MatrixConfig, out: str | Path, *, progress: bool = False, say: Callable[[str], None] = print
) -> MatrixResult:
    """Evaluate every (agent, user) cell not yet finished, then compare them; writes matrix.json and matrix.md."""
    out = Path(out)
    agents, users = _specs(config.agents, "agent"), _specs(config.users, "user simulator")
    _check_folder(out, config)
    shared, built_agents, built_users = build_matrix(config, agents, users)  # all checked before any cell runs
    summaries: dict[tuple[str, str], tuple[Summary, dict[str, list[float]]]] = {}
    try:
        for index, (agent, user) in enumerate((a, u) for a in agents for u in users):
            folder = out / "cells" / f"{agent.folder}__{user.folder}"
            say(f"cell {index + 1}/{len(agents) * len(users)}: agent {agent.text} x user {user.text} -> {folder}")
            spent = shared.cost()
            summary = await evaluate(
                shared.env, shared.tasks, built_agents[agent.text], built_users[user.text], folder,
                trials=config.trials, concurrency=config.concurrency, max_turns=config.max_turns,
                cost=lambda spent=spent: shared.cost() - spent, show_progress=progress,
                guard=lambda: stop_if_failing(shared.llms.values()),
            )  # fmt: skip
            if summary.failed:  # no comparison over a cell whose LLM failed: its backend is down, or rerun
                stop_if_failing(shared.llms.values(), ended=True)
                require_complete(f"cell {agent.text} x {user.text}", summary.pending, summary.failed)
            summaries[agent.text, user.text] = summary, _rewards(folder, shared.tasks, config.trials)
    finally:
        await aclose_all(shared.llms.values())
        for llm in shared.llms.values():
            llm.close()
    result = compare(config, agents, users, summaries, out)
    write_atomic(out / MATRIX_JSON, result.model_dump_json(indent=2) + "\n")
    write_atomic(out / MATRIX_MD, "\n".join(markdown(result)) + "\n")
    return result


def _rewards(folder: Path, tasks: list[Any], trials: int) -> dict[str, list[float]]:
    """Rewards per task of this matrix's (task, trial) pairs in a cell folder."""
    wanted = {(t.id, k) for t in tasks for k in range(trials)}
    rewards: dict[str, list[float]] = {}
    for record in load_finished(folder):
        if (record.task_id, record.trial) in wanted:
            rewards.setdefault(record.task_id, []).append(record.reward)
    return rewards


def compare(
    config: MatrixConfig,
    agents: list[Spec],
    users: list[Spec],
    summaries: dict[tuple[str, str], tuple[Summary, dict[str, list[float]]]],
    out: Path,
) -> MatrixResult:
    """Cells, each agent's spread across simulators, and every ranking flip between two simulators."""
    cells = [
        Cell(
            agent=a.text,
            user=u.text,
            folder=str(out / "cells" / f"{a.folder}__{u.folder}"),
            average_reward=s.average_reward,
            success_rate=s.success_rate,
            conversations=s.conversations,
        )  # fmt: skip
        for a in agents
        for u in users
        for s, _ in [summaries[a.text, u.text]]
    ]
    spreads = []
    for a in agents:
        means = {u.text: summaries[a.text, u.text][0].average_reward.mean for u in users}
        worst, best = min(means, key=means.__getitem__), max(means, key=means.__getitem__)
        spreads.append(Spread(agent=a.text, low=means[worst], high=means[best], worst_user=worst, best_user=best))
    flips = []
    for a, b in combinations([x.text for x in agents], 2):
        diffs = {u.text: paired_difference(summaries[b, u.text][1], summaries[a, u.text][1]) for u in users}
        for u, v in combinations([x.text for x in users], 2):
            du, dv = diffs[u].difference.mean, diffs[v].difference.mean
            if du * dv < 0:
                first, second = (u, v) if du > 0 else (v, u)
                flips.append(Flip(a=a, b=b, u=first, v=second, under_u=diffs[first], under_v=diffs[second]))
    return MatrixResult(config=config, cells=cells, spreads=spreads, flips=flips)


def table_rows(result: MatrixResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the reward table: one row per agent, one column per simulator, then its spread."""
    users = list(dict.fromkeys(c.user for c in result.cells))
    agents = list(dict.fromkeys(c.agent for c in result.cells))
    spread = {s.agent: s for s in result.spreads}
    header = ["agent \\ user", *users, "spread (max - min)"]
    rows = [
        [
            a,
            *(fmt_interval(result.cell(a, u).average_reward) for u in users),
            f"{spread[a].width:.3f} ({spread[a].worst_user} .. {spread[a].best_user})",
        ]
        for a in agents
    ]
    return header, rows


def flip_lines(result: MatrixResult) -> list[str]:
    """One sentence per ranking flip."""
    return [
        f"{f.a} vs {f.b}: {f.a} ahead with {f.u} ({fmt_interval(f.under_u.difference, signed=True)}), behind with {f.v} "
        f"({fmt_interval(f.under_v.difference, signed=True)}){' - both intervals exclude 0' if f.clear else ''}"
        for f in result.flips
    ]


def markdown(result: MatrixResult) -> list[str]:
    """``matrix.md``: the reward table, the spreads, and the ranking flips."""
    c = result.config
    header, rows = table_rows(result)
    lines = [
        f"# Agent x user-simulator matrix: {c.env}/{c.data}:{c.split}",
        "",
        f"Average reward with 95% bootstrap intervals over tasks ({c.limit or 'all'} tasks x {c.trials} trial(s) per "
        "cell). Spread: the agent's best minus worst average reward across simulators.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        "## Ranking flips",
        "",
        "Paired per-task reward differences (first agent minus second) under each simulator of the pair.",
        "",
    ]
    return lines + ([f"- {line}" for line in flip_lines(result)] or ["No two agents swap places between simulators."])


def print_matrix(result: MatrixResult, console: Any) -> None:
    """The reward table and the flips on the terminal."""
    header, rows = table_rows(result)
    table = Table(title=f"average reward [95% CI] -> {Path(result.cells[0].folder).parents[1]}/matrix.md")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in flip_lines(result) or ["no ranking flips between simulators"]:
        console.print(line)
