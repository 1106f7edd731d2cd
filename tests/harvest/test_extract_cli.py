"""``josh extract`` on a run folder written by the runner."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from josh.cli.main import app
from josh.search.rollout import run_rollouts
from tests.fakes.conversation import FakeEnv, TableAgent, TableUser, make_task


async def test_extract_command_writes_the_three_files(tmp_path) -> None:
    agent = TableAgent(goals={(1,): (0,), (1, 0, 1): (1,)})
    tasks = [make_task(2, "a"), make_task(2, "b"), make_task(3, "c")]
    await run_rollouts(tasks, FakeEnv(), agent, TableUser(), tmp_path, progress=False)
    result = CliRunner().invoke(app, ["extract", str(tmp_path), "--out", str(tmp_path / "data")])
    assert result.exit_code == 0, result.output
    assert "2/3 trees used" in result.output
    stats = json.loads((tmp_path / "data" / "extract_stats.json").read_text())
    assert stats["below_reward"] == 1 and stats["sft"] == 1 and stats["duplicates_dropped"] > 0
    assert json.loads((tmp_path / "stats.json").read_text())["tasks"] == 3


def test_extract_command_reports_a_missing_run(tmp_path) -> None:
    result = CliRunner().invoke(app, ["extract", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "josh rollout" in result.output
