"""What josh prints is documented: every row, column, class and count that ``josh eval``, ``josh rollout``,
``josh extract`` and ``josh data stats`` print or write is named in its page's "Reading the output" part, read from
the real table objects and records (a column added without its meaning fails here)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import get_args

from josh.cli.data import stats_columns
from josh.envs.toolwoz.agenda import AgendaUser
from josh.envs.toolwoz.oracle import OracleAgent
from josh.eval.evaluate import evaluate
from josh.eval.summary import summary_rows
from josh.harvest.extract_stats import ExtractStats
from josh.harvest.judge_gate import GateStats
from josh.run.conversation import EndReason
from josh.run.diagnostics import ARGUMENT_TABLE, CLASS_LABELS, TOOL_TABLE, ArgumentIssue
from josh.search.rollout import RunStats, TaskStats
from josh.types import ErrorCategory

DOCS = Path(__file__).resolve().parents[2] / "docs" / "concepts"


def documented(page: str, heading: str) -> set[str]:
    """The code spans of one part of a docs page: from ``heading`` to the next heading of its level or above."""
    text = (DOCS / page).read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(level)}}} ", text) if m.start() > start]
    part = re.sub(r"```.*?```", "", text[start : min(ends, default=len(text))], flags=re.DOTALL)  # code blocks
    return set(re.findall(r"`([^`]+)`", part))


def undocumented(names: list[str], page: str, heading: str) -> list[str]:
    spans = documented(page, heading)
    return [name for name in names if name not in spans]


def test_every_row_column_and_class_josh_eval_prints_is_documented(mini_env, tmp_path: Path) -> None:
    tasks = mini_env.tasks("test")[:3]
    summary = asyncio.run(evaluate(mini_env, tasks, OracleAgent(mini_env), AgendaUser(), tmp_path, trials=2))
    summary = summary.model_copy(update={"failed": 1})  # the row a run with failed conversations adds
    rows = [re.sub(r"\^\d+$", "^k", name) for name, _ in summary_rows(summary) if name not in summary.reward_notes]
    assert "endings" in rows and "pass^k" in rows
    tables = [TOOL_TABLE[0], *TOOL_TABLE[1], ARGUMENT_TABLE[0], *ARGUMENT_TABLE[1]]
    classes = [*CLASS_LABELS.values(), *(issue.value for issue in ArgumentIssue)]
    words = [*get_args(EndReason), *(category.value for category in ErrorCategory)]
    assert undocumented(rows + tables + classes + words, "evaluation.md", "### Reading the output") == []


def test_every_field_of_a_rollouts_stats_is_documented() -> None:
    fields = [*RunStats.model_fields, *TaskStats.model_fields]
    assert undocumented(fields, "search.md", "### Reading the output") == []


def test_every_count_josh_extract_writes_is_documented() -> None:
    fields = [*ExtractStats.model_fields, *GateStats.model_fields]
    assert undocumented(fields, "harvest.md", "## Reading the output") == []


def test_every_column_of_josh_data_stats_is_documented() -> None:
    assert undocumented(list(stats_columns()), "environments.md", "### ToolWOZ data (`josh data`)") == []
